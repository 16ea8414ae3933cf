//go:build chaos

package chaos

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/heraldhq/herald/pkg/testkit"
)

// proc is one OS process of the fleet (nats-server, switchboard, messenger,
// butler), started again with the same arguments after a kill. Each start
// writes its stdout and stderr to its own file, <name>.<n>.log.
type proc struct {
	name   string
	path   string
	args   []string
	env    []string
	logDir string
	// ready is a line fragment the process logs once it serves.
	ready string
	// httpAddr is the service's HERALD_HTTP_LISTEN (/healthz, /readyz,
	// /metrics); empty for NATS.
	httpAddr string

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{} // closed when the current start has exited
	stopped bool          // SIGSTOP sent, no SIGCONT yet
	starts  int
	logs    []string
}

// start runs the process and waits until it logs p.ready (or exits).
func (p *proc) start(readyWithin time.Duration) error {
	p.mu.Lock()
	if p.done != nil && !isClosed(p.done) {
		p.mu.Unlock()
		return fmt.Errorf("%s is already running", p.name)
	}
	p.starts++
	logPath := filepath.Join(p.logDir, fmt.Sprintf("%s.%d.log", p.name, p.starts))
	f, err := os.Create(logPath)
	if err != nil {
		p.mu.Unlock()
		return err
	}
	cmd := exec.Command(p.path, p.args...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = f, f
	err = cmd.Start()
	_ = f.Close() // the child holds its own descriptor
	if err != nil {
		p.mu.Unlock()
		return fmt.Errorf("starting %s: %w", p.name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	p.cmd, p.done, p.stopped = cmd, done, false
	p.logs = append(p.logs, logPath)
	p.mu.Unlock()
	return p.waitReady(readyWithin)
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// waitReady waits until the current start's log has p.ready. A process that
// is alive but quiet past the deadline is reported, not killed: a log line
// may have been reworded.
func (p *proc) waitReady(within time.Duration) error {
	p.mu.Lock()
	done, logPath := p.done, p.logs[len(p.logs)-1]
	p.mu.Unlock()
	deadline := time.Now().Add(within)
	for {
		b, _ := os.ReadFile(logPath)
		if p.ready == "" || bytes.Contains(b, []byte(p.ready)) {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("%s exited at start:\n%s\n(log: %s)", p.name, testkit.Tail(logPath, 8), logPath)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: %s did not log %q within %s (log: %s)", errNotReady, p.name, p.ready, within, logPath)
		}
	}
}

// errNotReady: the process runs but did not say it is ready.
var errNotReady = errors.New("not ready")

// signal sends sig to the running process.
func (p *proc) signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || isClosed(p.done) {
		return fmt.Errorf("%s is not running", p.name)
	}
	switch sig {
	case syscall.SIGSTOP:
		p.stopped = true
	case syscall.SIGCONT:
		p.stopped = false
	}
	return p.cmd.Process.Signal(sig)
}

// kill9 is kill -9: SIGKILL, and wait until the process is gone.
func (p *proc) kill9() error {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil || isClosed(done) {
		return fmt.Errorf("%s is not running", p.name)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	select {
	case <-done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("%s did not die within 10s of SIGKILL", p.name)
	}
}

// stop is a graceful stop: SIGTERM, and wait until the process exits. One
// still running after within is killed, and that is the error.
func (p *proc) stop(within time.Duration) error {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil || isClosed(done) {
		return fmt.Errorf("%s is not running", p.name)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-done:
		return nil
	case <-time.After(within):
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
	}
	return fmt.Errorf("%s did not exit within %s of SIGTERM; killed", p.name, within)
}

// running reports whether the current start is alive.
func (p *proc) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil && !isClosed(p.done)
}

// cleanup kills the process if it runs (continuing it first if stopped).
func (p *proc) cleanup() {
	p.mu.Lock()
	cmd, done, stopped := p.cmd, p.done, p.stopped
	p.mu.Unlock()
	if cmd == nil || isClosed(done) {
		return
	}
	if stopped {
		_ = cmd.Process.Signal(syscall.SIGCONT)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
	}
}

// logFiles are the log files of every start so far.
func (p *proc) logFiles() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.logs...)
}

// freePort is a TCP port on 127.0.0.1 that nothing listens on now, for a
// process to listen on a moment later. It is taken below the kernel's
// ephemeral range (ip_local_port_range, 32768 and up here and by default),
// whose ports every outgoing connection takes: a port of that range freed
// here can be a client's before the process binds it ("address already in
// use" for a NATS node's routes, seen in CI). Ports handed out are not
// handed out again in this run.
func freePort() (int, error) {
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 1000 {
		p := portsFrom + rand.IntN(portsTo-portsFrom)
		if portsTaken[p] {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		_ = l.Close()
		portsTaken[p] = true
		return p, nil
	}
	return 0, fmt.Errorf("no free port in %d-%d", portsFrom, portsTo)
}

// The ports freePort hands out: below the ephemeral range, above the
// well-known and commonly configured ones.
const portsFrom, portsTo = 20000, 32000

var (
	portsMu    sync.Mutex
	portsTaken = map[int]bool{}
)

// waitTCP waits until addr accepts connections.
func waitTCP(addr string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			return c.Close()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not listening after %s: %w", addr, within, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
