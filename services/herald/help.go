package herald

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"github.com/heraldhq/herald/services/process"
)

// versionUsage is the help of `herald version`.
const versionUsage = `Usage:
  herald version

Prints the version of this herald binary; herald --version does too, and
switchboard, messenger and butler take --version as well.

Example:
  herald version
`

// helpUsage is the help of `herald help`.
const helpUsage = `Usage:
  herald help [COMMAND [SUBCOMMAND]]

Prints the help of COMMAND, exactly as herald COMMAND --help does (with
SUBCOMMAND, as herald COMMAND SUBCOMMAND --help does), on stdout; with no
COMMAND, the list of commands, as herald --help does.

Example:
  herald help
`

// mainHelp is `herald help [COMMAND [SUBCOMMAND]]`: the command's own
// --help, so that there is one text for each and nothing to keep in step.
func mainHelp(ctx context.Context, args []string, o IO) int {
	switch {
	case process.AsksHelp(args):
		fmt.Fprint(o.Stdout, helpUsage)
		return 0
	case len(args) == 0:
		fmt.Fprint(o.Stdout, usage)
		return 0
	case len(args) > 2:
		fmt.Fprint(o.Stderr, helpUsage)
		return 2
	}
	c, ok := findCommand(args[0])
	if !ok {
		return unknownCommand(o, args[0])
	}
	if len(args) == 2 {
		if subs := helpOf(ctx, c).subs; !slices.Contains(subs, args[1]) {
			unknownSub(o.Stderr, c.name, args[1], subs)
			return 2
		}
	}
	return c.main(ctx, append(args[1:], "--help"), o)
}

// unknownCommand tells that herald has no command name, with the closest
// it has, and returns the exit code of a bad command line.
func unknownCommand(o IO, name string) int {
	names := make([]string, 0, 20)
	for _, c := range commands() {
		names = append(names, c.name)
	}
	fmt.Fprintf(o.Stderr, "herald: unknown command %q%s\nRun herald --help for the list.\n", name, didYouMean(name, names))
	return 2
}

// unknownSub tells that `herald cmd` has no subcommand sub, with the
// closest of subs.
func unknownSub(w io.Writer, cmd, sub string, subs []string) {
	fmt.Fprintf(w, "herald %s: unknown subcommand %q%s\nRun herald %s --help for its usage.\n", cmd, sub, didYouMean(sub, subs), cmd)
}

// didYouMean is `; did you mean "x"?` for the one of names closest to
// typed, or "" when none is close: the only one typed begins, else the
// first at the smallest edit distance, if that is at most a third of
// what was typed (one for a short word).
func didYouMean(typed string, names []string) string {
	var prefixed []string
	for _, n := range names {
		if len(typed) >= 2 && strings.HasPrefix(n, typed) {
			prefixed = append(prefixed, n)
		}
	}
	if len(prefixed) == 1 {
		return fmt.Sprintf("; did you mean %q?", prefixed[0])
	}
	best, bestDist := "", max(1, (len(typed)+2)/3)+1
	for _, n := range names {
		if d := editDistance(typed, n); d < bestDist {
			best, bestDist = n, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf("; did you mean %q?", best)
}

// editDistance is the number of letters to insert, delete or change, or
// of neighbours to swap, to make a into b (the optimal string alignment
// distance): "stauts" is one from "status".
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	// d[i][j] is the distance between ra[:i] and rb[:j].
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}

// commandHelp is what a command's --help says it takes.
type commandHelp struct {
	// subs are its subcommands: the words after its name in its Usage
	// block (herald dead ls ..., herald pair list|ls ...).
	subs []string
	// flags are the flags of its Flags block.
	flags []helpFlag
	// files says whether it takes a FILE besides its flags' (herald config
	// check [FILE]).
	files bool
}

// helpFlag is one flag as a help lists it: --config FILE.
type helpFlag struct {
	name string // --config
	arg  string // FILE; "" for a flag that takes no value
}

var (
	subWords = regexp.MustCompile(`^[a-z][a-z0-9-]*(\|[a-z][a-z0-9-]*)*$`)
	flagLine = regexp.MustCompile(`^  (--[a-z][a-z0-9-]*)(?: ([A-Z]+))?(?:\s{3,}|$)`)
)

// helpOf runs c with --help and reads its subcommands and flags from what
// it prints: the help is the one list of what a command takes.
func helpOf(ctx context.Context, c command) commandHelp {
	var out bytes.Buffer
	c.main(ctx, []string{"--help"}, IO{Getenv: func(string) string { return "" }, Stdin: strings.NewReader(""), Stdout: &out, Stderr: io.Discard})
	var h commandHelp
	_, rest, _ := strings.Cut(out.String(), "Usage:\n")
	synopsis, rest, _ := strings.Cut(rest, "\n\n")
	for _, l := range strings.Split(synopsis, "\n") {
		f := strings.Fields(l)
		if len(f) < 2 || f[0] != "herald" || f[1] != c.name {
			continue
		}
		if len(f) > 2 && subWords.MatchString(f[2]) {
			for _, s := range strings.Split(f[2], "|") {
				if !slices.Contains(h.subs, s) {
					h.subs = append(h.subs, s)
				}
			}
		}
		for i, w := range f {
			if strings.Trim(w, "[]") == "FILE" && !strings.HasPrefix(strings.Trim(f[i-1], "[]"), "-") {
				h.files = true
			}
		}
	}
	if _, flags, ok := strings.Cut(rest, "Flags:\n"); ok {
		flags, _, _ = strings.Cut(flags, "\n\n")
		for _, l := range strings.Split(flags, "\n") {
			if m := flagLine.FindStringSubmatch(l); m != nil {
				h.flags = append(h.flags, helpFlag{m[1], m[2]})
			}
		}
	}
	return h
}
