package config

import (
	"cmp"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// problem is one thing wrong with a configuration file: the line it is on
// (0: not in the file, such as a default), the path of the key at fault and
// the message, which starts with that path and says what to write instead.
type problem struct {
	line int
	path string
	text string
}

// Problem is one thing wrong with a configuration: the line of the file it
// is on (0: on none, such as a default, or a configuration built in code)
// and what is wrong, which starts with the path of the key at fault and
// says what to write instead. It never holds a secret (scrub).
type Problem struct {
	Line int
	Text string
}

func (p Problem) String() string {
	if p.Line > 0 {
		return fmt.Sprintf("line %d: %s", p.Line, p.Text)
	}
	return p.Text
}

// InvalidError is the error of a configuration that cannot be used as
// written (it wraps ErrInvalid): every problem, in the order of the file,
// those on no line last. `herald config check` prints them as
// FILE:LINE: TEXT, an editor's way.
type InvalidError struct {
	// File is the file as Load was given it; "" from Parse and Validate.
	File     string
	Problems []Problem
}

func (e *InvalidError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	msg := fmt.Sprintf("%v:\n  %s", ErrInvalid, strings.Join(lines, "\n  "))
	if e.File != "" {
		return e.File + ": " + msg
	}
	return msg
}

func (e *InvalidError) Unwrap() error { return ErrInvalid }

// invalid is the error of probs: every one, a line each, in the order of
// the file (those on no line last), each said once and with no secret in
// it, but for the names in keep (scrub).
func invalid(probs []problem, keep []string) *InvalidError {
	slices.SortStableFunc(probs, func(a, b problem) int {
		return cmp.Compare(lineOrLast(a.line), lineOrLast(b.line))
	})
	e := &InvalidError{}
	for _, p := range probs {
		q := Problem{Line: p.line, Text: scrub(p.text, keep)}
		if !slices.Contains(e.Problems, q) {
			e.Problems = append(e.Problems, q)
		}
	}
	return e
}

// notShown is what a message shows in place of a secret.
const notShown = "<secret, not shown>"

// scrub is msg with every word that looks like a secret (looksLikeSecret)
// replaced by notShown: a message about a file must not repeat a secret
// pasted into it, wherever it was pasted and whoever wrote the message (the
// YAML decoder quotes values; a channel's Check may name its api_url).
// The names in keep are left: an integration id or a butler name may have
// a secret's shape (int_gXuDla4UZipcm2tg3McPX), and is no secret.
func scrub(msg string, keep []string) string {
	apart := func(r rune) bool { return unicode.IsSpace(r) || strings.ContainsRune("\"'`,;()[]{}<>|=&?#/@", r) }
	var b strings.Builder
	for i := 0; i < len(msg); {
		end := strings.IndexFunc(msg[i:], apart)
		if end == 0 {
			_, size := utf8.DecodeRuneInString(msg[i:])
			b.WriteString(msg[i : i+size])
			i += size
			continue
		}
		if end < 0 {
			end = len(msg) - i
		}
		word := msg[i : i+end]
		core := strings.TrimRight(word, ".:")
		if secretWord(core, keep) {
			b.WriteString(notShown + word[len(core):])
		} else {
			b.WriteString(word)
		}
		i += end
	}
	return b.String()
}

// secretWord reports whether w, a word of a message, is a secret: it looks
// like one, and is not one of keep or made of them ("telegram:<id>",
// "<id>:12345").
func secretWord(w string, keep []string) bool {
	if slices.Contains(keep, w) {
		return false
	}
	if telegramTokenShape.MatchString(w) {
		return true
	}
	for _, piece := range strings.Split(w, ":") {
		if looksLikeSecret(piece) && !slices.Contains(keep, piece) {
			return true
		}
	}
	return false
}

// names are the integration ids and butler names of c, which scrub keeps.
func (c *Config) names() []string {
	if c == nil {
		return nil
	}
	var out []string
	for _, in := range c.Integrations {
		out = append(out, in.ID)
	}
	return append(out, c.ButlerNames()...)
}

// yamlLine is the "yaml: line N: " the YAML parser's errors start with.
var yamlLine = regexp.MustCompile(`^yaml: line ([0-9]+): `)

// syntaxProblem is the problem of a document the YAML parser could not
// read (err): at the line of the mistake the indentation shows, where
// indentHint finds it (the parser often names a line above it), else at
// the parser's.
func syntaxProblem(doc []byte, err error) problem {
	if line, hint := indentHint(string(doc)); hint != "" {
		return problem{line: line, text: fmt.Sprintf("%s (the YAML parser says: %v)", hint, err)}
	}
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return problem{line: line, text: "the YAML parser says: " + msg[len(m[0]):]}
	}
	return problem{text: msg}
}

func lineOrLast(line int) int {
	if line == 0 {
		return int(^uint(0) >> 1)
	}
	return line
}

// placed are Validate's messages as problems of the file whose top node is
// root (nil: no file): each at the line of the key its message starts with.
// A message about a key already found unknown or of the wrong type, or
// about the block holding one, is left out: it would say the same again
// (a misspelt secret_env is not also a missing one). A message about a key
// the file has, inside such a block, is not (a token pasted in token_env
// beside a misspelt key).
func placed(root *yaml.Node, msgs []string, found []problem) []problem {
	var out []problem
	for _, msg := range msgs {
		branch, path := subjectOf(msg)
		line, whole := locate(root, path)
		subject := branch
		if whole {
			subject = path
		}
		if slices.ContainsFunc(found, func(p problem) bool { return onBranch(p.path, subject) }) {
			continue
		}
		out = append(out, problem{line: line, path: branch, text: msg})
	}
	return out
}

// subjectOf is the key path a message of Validate starts with, as branch,
// and the path whose line it is on. They differ for a problem of an
// integration's channel settings, `integrations[0] (telegram tg): api_url
// ...`: its branch is integrations[0], its path integrations[0].api_url
// (a word that names no key, as in "needs token_env", leaves the
// integration's own line).
func subjectOf(msg string) (branch, path string) {
	branch = leadingPath(msg)
	path = branch
	if rest, ok := strings.CutPrefix(msg[len(branch):], " ("); ok {
		if _, after, ok := strings.Cut(rest, "): "); ok {
			if sub := leadingPath(after); sub != "" {
				path = branch + "." + sub
			}
		}
	}
	return branch, path
}

// leadingPath is the key path s starts with: up to the first character
// that is none of a path's (letters, digits, _ - . [ ]).
func leadingPath(s string) string {
	end := strings.IndexFunc(s, func(r rune) bool {
		return !(r == '_' || r == '-' || r == '.' || r == '[' || r == ']' ||
			'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9')
	})
	if end < 0 {
		end = len(s)
	}
	return strings.TrimRight(s[:end], ".")
}

// onBranch reports whether paths a and b are one key or one holds the
// other (butlers[0] holds butlers[0].name); an empty path is no key.
func onBranch(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	holds := func(outer, inner string) bool {
		rest, ok := strings.CutPrefix(inner, outer)
		return ok && (rest == "" || rest[0] == '.' || rest[0] == '[')
	}
	return holds(a, b) || holds(b, a)
}

// lineOf is the line of the deepest node of the document whose top node is
// root that path ("integrations[1].inbound.rate_limit") leads to: the
// value's line for a key of one value, the key's line for a key holding a
// block or list, the item's line for a list item. 0 if not even the first
// key of path is in the document.
func lineOf(root *yaml.Node, path string) int {
	line, _ := locate(root, path)
	return line
}

// locate is lineOf, and whether the document has the whole of path.
func locate(root *yaml.Node, path string) (line int, whole bool) {
	if root == nil || path == "" {
		return 0, false
	}
	parts := strings.Split(path, ".")
	n, line := root, 0
	for i := 0; i < len(parts); i++ {
		key, idx := splitIndexes(parts[i])
		val, at := lookup(n, key)
		for j := i + 1; val == nil && j < len(parts); j++ {
			// A key with dots in it (a webhook's recipient "ops.eu").
			key, idx = splitIndexes(strings.Join(parts[i:j+1], "."))
			if val, at = lookup(n, key); val != nil {
				i = j
			}
		}
		if val == nil {
			return line, false
		}
		n, line = val, at
		for _, x := range idx {
			n = deref(n)
			if n.Kind != yaml.SequenceNode || x >= len(n.Content) {
				return line, false
			}
			n, line = n.Content[x], n.Content[x].Line
		}
	}
	return line, true
}

// splitIndexes splits "approvers[0]" into approvers and [0]; a part that is
// not key[N]... is a key as it is.
func splitIndexes(part string) (string, []int) {
	key, rest, ok := strings.Cut(part, "[")
	if !ok {
		return part, nil
	}
	var idx []int
	for _, s := range strings.Split(rest, "[") {
		x, err := strconv.Atoi(strings.TrimSuffix(s, "]"))
		if err != nil || !strings.HasSuffix(s, "]") {
			return part, nil
		}
		idx = append(idx, x)
	}
	return key, idx
}

// lookup is the value of key in block n (or in a block merged into it with
// <<) and the line lineOf takes for it; nil if n has no such key.
func lookup(n *yaml.Node, key string) (*yaml.Node, int) {
	n = deref(n)
	if n.Kind != yaml.MappingNode {
		return nil, 0
	}
	var merged []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		switch {
		case k.Value == key:
			if deref(v).Kind == yaml.ScalarNode {
				return v, v.Line
			}
			return v, k.Line
		case k.Tag == "!!merge" || k.Value == "<<":
			if v = deref(v); v.Kind == yaml.SequenceNode {
				merged = append(merged, v.Content...)
			} else {
				merged = append(merged, v)
			}
		}
	}
	for _, m := range merged {
		if v, line := lookup(m, key); v != nil {
			return v, line
		}
	}
	return nil, 0
}

// undecoded are the decoder's complaints (err) at lines where checkKeys
// found nothing: none, unless the two disagree; nothing is left unsaid.
func undecoded(err error, found []problem) []problem {
	if err == nil {
		return nil
	}
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return []problem{{text: err.Error()}}
	}
	var out []problem
	for _, e := range te.Errors {
		line := 0
		if m := linePrefix.FindStringSubmatch(e); m != nil {
			line, _ = strconv.Atoi(m[1])
			e = e[len(m[0]):]
		}
		if !slices.ContainsFunc(found, func(p problem) bool { return p.line == line }) {
			out = append(out, problem{line: line, text: e})
		}
	}
	return out
}

// joinTypeErrors is errs as one *yaml.TypeError, which lets the decoder go
// on to the next value where any other error would stop it; an error of
// another kind is returned as it is.
func joinTypeErrors(errs ...error) error {
	var all []string
	for _, err := range errs {
		var te *yaml.TypeError
		switch {
		case err == nil:
		case errors.As(err, &te):
			all = append(all, te.Errors...)
		default:
			return err
		}
	}
	if len(all) == 0 {
		return nil
	}
	return &yaml.TypeError{Errors: all}
}

// typeError is a decoding problem at n that lets the decoder go on.
func typeError(n *yaml.Node, format string, a ...any) error {
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: ", n.Line) + fmt.Sprintf(format, a...)}}
}
