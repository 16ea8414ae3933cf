package herald_test

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// completionScript is what `herald completion shell` prints, saved in a
// file of the test's.
func completionScript(t *testing.T, shell string) (path, script string) {
	t.Helper()
	code, stdout, stderr := run(t, nil, "completion", shell)
	if code != 0 || stderr != "" || stdout == "" {
		t.Fatalf("herald completion %s exited %d, stderr %q", shell, code, stderr)
	}
	path = filepath.Join(t.TempDir(), "herald."+shell)
	writeFile(t, path, stdout)
	return path, stdout
}

// TestCompletionBash: sourced in a real bash, the script registers a
// completion for herald that offers its commands, a command's subcommands
// and its flags, as each one's --help lists them.
func TestCompletionBash(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash here to source the script in")
	}
	path, _ := completionScript(t, "bash")
	// offer WORDS... prints what bash offers for the words typed so far,
	// the last one being completed.
	probe := `source "$1" || exit 1
complete -p herald
offer() { COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMPREPLY=(); _herald; echo "${COMPREPLY[*]}"; }
offer herald de
offer herald dead ""
offer herald dead replay --w
offer herald pair l
offer herald help to
offer herald help dead r
offer herald completion ""
offer herald log --req
`
	out, err := exec.Command(bash, "--norc", "--noprofile", "-c", probe, "probe", path).CombinedOutput()
	if err != nil {
		t.Fatalf("bash: %v\n%s", err, out)
	}
	want := `complete -o default -F _herald herald
dev dead
ls replay
--wait
list ls
token
replay
bash zsh fish
--request-id
`
	if string(out) != want {
		t.Errorf("bash offers\n%s\nwant\n%s", out, want)
	}
}

// TestCompletionZshFish: the zsh and fish scripts offer every command, a
// command's subcommands and its flags; where the shell is installed, it
// reads the script without a syntax error.
func TestCompletionZshFish(t *testing.T) {
	for _, tt := range []struct {
		shell   string
		command string // how the script offers command %s
		has     []string
		// probe runs the script ($1) in the shell; offers is what it prints.
		probe, offers string
	}{
		{"zsh", "\n    %s) subs=(", []string{
			"    'dead:messages Herald gave up on, and replaying them'\n",
			"    dead) subs=(ls replay) flags=(--all --config --json --timeout --wait --help) ;;\n",
			"    'help'\n",
		},
			// compadd, _describe and _files print what they are given (zsh
			// filters it by what was typed itself).
			`autoload -U compinit && compinit -u -D && source "$1" && print -r -- $_comps[herald]
compadd() { [[ $1 == -a ]] && print -r -- ${(P)2} }
_describe() { print -r -- ${${(P)4}%%:*} }
_files() { print -r -- "(files)" }
offer() { local -a words; words=("$@"); local CURRENT=$# PREFIX=$words[-1]; _herald }
offer herald de
offer herald dead ""
offer herald dead replay --w
offer herald help dead ""
offer herald config check ""`,
			"_herald\ndev status config notify pair dead init setup nats-auth token log reload grants run healthcheck version help completion\nls replay\n--all --config --json --timeout --wait --help\nls replay\n(files)\n"},
		{"fish", "-eq 1' -a %s", []string{
			"complete -c herald -n 'test (count (commandline -opc)) -eq 1' -a grants -d 'the sessions approvers allowed a tool (\"Allow for this session\")'\n",
			"complete -c herald -n '__herald_sub token' -a 'mint ls revoke'\n",
			"complete -c herald -n '__herald_is log' -l request-id -x\n",
			"complete -c herald -n '__herald_is dead' -l config -r -F\n",
			"complete -c herald -n '__herald_is dead' -l all\n",
			"-d 'start Claude Code for the messages no session takes (a butler\\'s run block)'",
		}, `source $argv[-1]; complete -C 'herald de'; complete -C 'herald dead '; complete -C 'herald log --req'`,
			"dead\tmessages Herald gave up on, and replaying them\ndev\trun NATS, the switchboard, the messenger and every butler in one process\nls\nreplay\n--request-id\n"},
	} {
		t.Run(tt.shell, func(t *testing.T) {
			shell := tt.shell
			path, script := completionScript(t, shell)
			for _, name := range []string{"dev", "status", "config", "notify", "pair", "dead", "init", "setup", "nats-auth", "token", "log", "reload", "grants", "run", "healthcheck", "version", "help", "completion"} {
				if !strings.Contains(script, fmt.Sprintf(tt.command, name)) {
					t.Errorf("the %s script does not offer the command %s", shell, name)
				}
			}
			for _, line := range tt.has {
				if !strings.Contains(script, line) {
					t.Errorf("the %s script has no %q:\n%s", shell, line, script)
				}
			}
			bin, err := exec.LookPath(shell)
			if err != nil {
				t.Logf("no %s here: the script is not run in it", shell)
				return
			}
			if out, err := exec.Command(bin, "-n", path).CombinedOutput(); err != nil {
				t.Errorf("%s -n %s: %v\n%s", shell, path, err, out)
			}
			cmd := exec.Command(bin, "-c", tt.probe, "probe", path)
			home := t.TempDir()
			cmd.Env = []string{"HOME=" + home, "XDG_CONFIG_HOME=" + home, "XDG_DATA_HOME=" + home, "XDG_CACHE_HOME=" + home, "PATH=/usr/bin:/bin"}
			out, err := cmd.CombinedOutput()
			if err != nil || string(out) != tt.offers {
				t.Errorf("%s offers (%v)\n%s\nwant\n%s", shell, err, out, tt.offers)
			}
		})
	}
}
