//go:build claude

package claude

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// screen is an interactive program in a terminal: a detached session of a
// tmux server of its own (its socket in a temp dir, so the user's tmux is
// neither seen nor touched). Claude Code runs interactively only when its
// stdout is a terminal; under a pipe it answers one prompt and exits.
type screen struct {
	t       *testing.T
	socket  string
	closing sync.Once
}

// startScreen runs argv in dir under env on a 200x50 terminal. When the
// program exits, the screen says so on its last line and stays readable.
func startScreen(t *testing.T, dir string, env, argv []string) *screen {
	t.Helper()
	sockDir, err := os.MkdirTemp("", "herald-tmux-") // short: socket paths are limited to ~100 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	s := &screen{t: t, socket: sockDir + "/tmux.sock"}
	cmdline := append([]string{"new-session", "-d", "-s", "claude", "-x", "200", "-y", "50", "-c", dir,
		"sh", "-c", `"$@"; echo "[exited with status $?]"; exec sleep 3600`, "sh"}, argv...)
	if out, err := s.tmux(env, cmdline...); err != nil {
		t.Fatalf("tmux new-session: %v\n%s", err, out)
	}
	t.Cleanup(s.close)
	return s
}

// close ends the program as a user would (/exit), so that it is gone before
// the test's temp dirs are, then the tmux server.
func (s *screen) close() {
	s.closing.Do(func() {
		defer s.tmux(nil, "kill-server")
		if _, ok := s.exited(); ok {
			return
		}
		_, _ = s.tmux(nil, "send-keys", "-t", "claude", "-l", "/exit")
		_, _ = s.tmux(nil, "send-keys", "-t", "claude", "Enter")
		for end := time.Now().Add(15 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
			if _, ok := s.exited(); ok {
				return
			}
		}
		s.t.Logf("the program did not end on /exit within 15s; its terminal goes. Screen:\n%s", s.text())
	})
}

func (s *screen) tmux(env []string, args ...string) (string, error) {
	cmd := exec.Command("tmux", append([]string{"-S", s.socket}, args...)...)
	if env != nil {
		cmd.Env = env // the server started here passes it to the session
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// text is what the terminal shows now.
func (s *screen) text() string {
	out, err := s.tmux(nil, "capture-pane", "-p", "-t", "claude")
	if err != nil {
		return fmt.Sprintf("(capture-pane: %v: %s)", err, out)
	}
	return strings.TrimRight(out, "\n")
}

func (s *screen) keys(keys ...string) {
	s.t.Helper()
	if out, err := s.tmux(nil, append([]string{"send-keys", "-t", "claude"}, keys...)...); err != nil {
		s.t.Fatalf("tmux send-keys %v: %v: %s", keys, err, out)
	}
}

// exited reports whether the program has ended, and how.
func (s *screen) exited() (string, bool) {
	for _, l := range strings.Split(s.text(), "\n") {
		if strings.HasPrefix(l, "[exited with status ") {
			return l, true
		}
	}
	return "", false
}

// choose answers the menu below title with the option whose line contains
// label: it moves the selection marker (❯) there one key at a time, each
// seen on the screen before the next (two arrow keys sent at once can reach
// Claude Code as something else), presses Enter once the marker rests on the
// option, and waits for the dialog to go, so that no later key lands in it.
func (s *screen) choose(title, label string) error {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		at, want := s.menu(title, label)
		switch {
		case at < 0 || want < 0:
			time.Sleep(100 * time.Millisecond)
		case at == want:
			time.Sleep(300 * time.Millisecond)
			if at, want = s.menu(title, label); at != want {
				continue
			}
			s.keys("Enter")
			for time.Now().Before(deadline) {
				if !strings.Contains(s.text(), title) {
					return nil
				}
				time.Sleep(100 * time.Millisecond)
			}
		default:
			key := "Down"
			if want < at {
				key = "Up"
			}
			s.keys(key)
			for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
				if now, _ := s.menu(title, label); now != at {
					break
				}
			}
		}
	}
	return fmt.Errorf("could not choose %q in the dialog %q within a minute; screen:\n%s", label, title, s.text())
}

// menu is the line of the selection marker and of label in the menu below
// title on the screen now (-1: not there).
func (s *screen) menu(title, label string) (at, want int) {
	lines := strings.Split(s.text(), "\n")
	i := slices.IndexFunc(lines, func(l string) bool { return strings.Contains(l, title) })
	if i < 0 {
		return -1, -1
	}
	at, want = -1, -1
	for j, l := range lines[i+1:] {
		if strings.Contains(l, "❯") && at < 0 {
			at = j
		}
		if strings.Contains(l, label) {
			want = j
		}
	}
	return at, want
}
