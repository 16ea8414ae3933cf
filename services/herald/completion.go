package herald

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/heraldhq/herald/services/butler"
)

const completionUsage = `Usage:
  herald completion bash|zsh|fish

Prints a script that completes herald's commands, their subcommands and
their flags in the shell named, made from what this herald's own --help
says (make it again after an upgrade). bash: source it from ~/.bashrc, or
save it as ~/.local/share/bash-completion/completions/herald; zsh: save it
as _herald in a directory of $fpath, or source it after compinit; fish:
save it as ~/.config/fish/completions/herald.fish.

Examples:
  herald completion bash > herald.bash   # then source herald.bash, or save it as ~/.local/share/bash-completion/completions/herald
  herald completion zsh > _herald        # then put it in a directory of $fpath
  herald completion fish > herald.fish   # then save it as ~/.config/fish/completions/herald.fish
`

// runCompletion is `herald completion bash|zsh|fish`.
func runCompletion(ctx context.Context, args []string, o IO) error {
	sub, fs, args := subcommandFlags("completion", completionUsage, args, o)
	if err := parseFlagsOnly(fs, args); err != nil {
		return err
	}
	if err := checkSub(fs, "completion", sub, "bash", "zsh", "fish"); err != nil {
		return err
	}
	cmds := completionCommands(ctx)
	switch sub {
	case "bash":
		return bashCompletion(o.Stdout, cmds)
	case "zsh":
		return zshCompletion(o.Stdout, cmds)
	}
	return fishCompletion(o.Stdout, cmds)
}

// completionCommand is one command as a completion script knows it.
type completionCommand struct {
	name  string
	about string // its line in herald --help; "" for none
	subs  []string
	flags []helpFlag
	files bool
}

// aboutLine is a command's line in herald --help: the command, its
// arguments, then after two spaces or more what it does.
var aboutLine = regexp.MustCompile(`^  herald ([a-z-]+)(?: .*?)?\s{2,}(\S.*)$`)

// completionCommands are herald's commands with what each one's --help
// lists, so that a script cannot offer what the commands do not take; the
// subcommands of herald help are the commands.
func completionCommands(ctx context.Context) []completionCommand {
	about := map[string]string{}
	_, index, _ := strings.Cut(usage, "Usage:\n")
	index, _, _ = strings.Cut(index, "\n\n")
	for _, l := range strings.Split(index, "\n") {
		if m := aboutLine.FindStringSubmatch(l); m != nil {
			about[m[1]] = m[2]
		}
	}
	var names []string
	for _, c := range commands() {
		names = append(names, c.name)
	}
	var out []completionCommand
	for _, c := range commands() {
		h := helpOf(ctx, c)
		cc := completionCommand{name: c.name, about: about[c.name], subs: h.subs, flags: append(h.flags, helpFlag{name: "--help"}), files: h.files}
		if c.name == "help" {
			cc.subs = names
		}
		out = append(out, cc)
	}
	return out
}

func (c completionCommand) flagNames() string {
	names := make([]string, len(c.flags))
	for i, f := range c.flags {
		names[i] = f.name
	}
	return strings.Join(names, " ")
}

func commandNames(cmds []completionCommand) string {
	names := make([]string, len(cmds))
	for i, c := range cmds {
		names[i] = c.name
	}
	return strings.Join(names, " ")
}

func bashCompletion(w io.Writer, cmds []completionCommand) error {
	var b strings.Builder
	b.WriteString(`# bash completion for herald: its commands, their subcommands and flags, as
# the --help of herald ` + butler.Version + ` lists them (herald completion bash).

# _herald_words sets subs and flags to those of command $1.
_herald_words() {
	case $1 in
`)
	for _, c := range cmds {
		fmt.Fprintf(&b, "\t%s) subs='%s' flags='%s' ;;\n", c.name, strings.Join(c.subs, " "), c.flagNames())
	}
	fmt.Fprintf(&b, `	*) subs='' flags='' ;;
	esac
}

_herald() {
	local cur=${COMP_WORDS[COMP_CWORD]} subs flags
	COMPREPLY=()
	if ((COMP_CWORD == 1)); then
		COMPREPLY=($(compgen -W '%s' -- "$cur"))
		return
	fi
	_herald_words "${COMP_WORDS[1]}"
	if [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W "$flags" -- "$cur"))
	elif ((COMP_CWORD == 2)); then
		COMPREPLY=($(compgen -W "$subs" -- "$cur"))
	elif ((COMP_CWORD == 3)) && [[ ${COMP_WORDS[1]} == help ]]; then
		_herald_words "${COMP_WORDS[2]}"
		COMPREPLY=($(compgen -W "$subs" -- "$cur"))
	fi
}

complete -o default -F _herald herald
`, commandNames(cmds))
	_, err := io.WriteString(w, b.String())
	return err
}

func zshCompletion(w io.Writer, cmds []completionCommand) error {
	var b strings.Builder
	b.WriteString(`#compdef herald
# zsh completion for herald: its commands, their subcommands and flags, as
# the --help of herald ` + butler.Version + ` lists them (herald completion zsh).

# _herald_words sets subs and flags to those of command $1.
_herald_words() {
  case $1 in
`)
	for _, c := range cmds {
		fmt.Fprintf(&b, "    %s) subs=(%s) flags=(%s) ;;\n", c.name, strings.Join(c.subs, " "), c.flagNames())
	}
	b.WriteString(`    *) subs=() flags=() ;;
  esac
}

_herald() {
  local -a commands subs flags
  commands=(
`)
	for _, c := range cmds {
		entry := c.name
		if c.about != "" {
			entry += ":" + c.about
		}
		fmt.Fprintf(&b, "    %s\n", shQuote(entry))
	}
	b.WriteString(`  )
  if (( CURRENT == 2 )); then
    _describe -t commands 'herald command' commands
    return
  fi
  _herald_words $words[2]
  if [[ $PREFIX == -* ]]; then
    compadd -a flags
  elif (( CURRENT == 3 && $#subs )); then
    compadd -a subs
  elif (( CURRENT == 4 )) && [[ $words[2] == help ]]; then
    _herald_words $words[3]
    compadd -a subs
  else
    _files
  fi
}

if [[ $funcstack[1] == _herald ]]; then
  _herald "$@"
else
  compdef _herald herald
fi
`)
	_, err := io.WriteString(w, b.String())
	return err
}

func fishCompletion(w io.Writer, cmds []completionCommand) error {
	var b strings.Builder
	b.WriteString(`# fish completion for herald: its commands, their subcommands and flags, as
# the --help of herald ` + butler.Version + ` lists them (herald completion fish).

function __herald_is --description 'herald $argv[1] is being completed'
    set -l words (commandline -opc)
    test (count $words) -ge 2; and test $words[2] = $argv[1]
end

function __herald_sub --description 'the subcommand of herald $argv[1] is being completed'
    set -l words (commandline -opc)
    test (count $words) -eq 2; and test $words[2] = $argv[1]
end

`)
	b.WriteString("# Files only where a command or a flag takes one.\ncomplete -c herald -f\n")
	for _, c := range cmds {
		fmt.Fprintf(&b, "complete -c herald -n 'test (count (commandline -opc)) -eq 1' -a %s", c.name)
		if c.about != "" {
			fmt.Fprintf(&b, " -d %s", fishQuote(c.about))
		}
		b.WriteString("\n")
	}
	for _, c := range cmds {
		if len(c.subs) > 0 {
			fmt.Fprintf(&b, "complete -c herald -n '__herald_sub %s' -a '%s'\n", c.name, strings.Join(c.subs, " "))
		}
		if c.files {
			fmt.Fprintf(&b, "complete -c herald -n '__herald_is %s' -F\n", c.name)
		}
		for _, f := range c.flags {
			fmt.Fprintf(&b, "complete -c herald -n '__herald_is %s' -l %s", c.name, strings.TrimPrefix(f.name, "--"))
			switch f.arg {
			case "":
			case "FILE":
				b.WriteString(" -r -F")
			default:
				b.WriteString(" -x")
			}
			b.WriteString("\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// shQuote is s in single quotes for sh and zsh.
func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// fishQuote is s in single quotes for fish, which escapes \ and ' in them.
func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}
