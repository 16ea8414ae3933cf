package claude

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// StderrTailBytes is how much of the end of stderr a session keeps for
// ExitError.
const StderrTailBytes = 4 << 10

// drainGrace bounds the wait for the pipes to close once the process has
// exited: a process it left behind outside its group may hold them open.
const drainGrace = 2 * time.Second

// Session is one running Claude Code process. Its methods are safe for
// concurrent use; Next is meant for one reader.
type Session struct {
	name   string // the command, for messages
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *os.File
	stderr *tail

	writeMu sync.Mutex // one line at a time on stdin

	mu         sync.Mutex
	queue      []Event
	pending    map[string]chan *ControlResponse // by request_id
	sessionID  string
	lastFailed bool // the last Result was an error
	closing    bool // Close has begun
	stopped    bool // Close signalled the process
	readErr    error

	ready      chan struct{} // a token when queue grows
	readerDone chan struct{} // stdout is read to its end
	stderrDone chan struct{}
	exited     chan struct{} // the process is gone; waitErr and endErr are set
	waitErr    error         // nil or *ExitError
	endErr     error         // waitErr unless the end was Close's doing

	closeOnce sync.Once
	closeErr  error
	stopCtx   func() bool
}

// Start starts Claude Code as o says, in a process group of its own (so a
// Ctrl-C at Herald's terminal does not reach it, and stopping it stops what
// it started). The session ends when ctx does (as Close(0) ends it) or when
// Close is called. Claude Code writes its first event only once it has a
// user turn.
func Start(ctx context.Context, o Options) (*Session, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	// exec reports a missing Dir as the command missing: say it right.
	if fi, err := os.Stat(o.Dir); err != nil || !fi.IsDir() {
		if err == nil {
			err = fmt.Errorf("%s is not a directory", o.Dir)
		}
		return nil, fmt.Errorf("claude: the session's working directory: %w", err)
	}
	env := environ(os.Environ(), o.Env)
	argv := o.Argv()
	path, err := lookPath(argv[0], getenv(env, "PATH"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, argv[1:]...)
	cmd.Args[0] = argv[0]
	cmd.Dir, cmd.Env = o.Dir, env
	// Its own group, so Close stops the MCP servers and tools it started too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stopWithParent(cmd.SysProcAttr)
	s := &Session{
		name: argv[0], cmd: cmd, stderr: &tail{max: StderrTailBytes}, sessionID: o.Resume,
		pending: map[string]chan *ControlResponse{}, ready: make(chan struct{}, 1),
		readerDone: make(chan struct{}), stderrDone: make(chan struct{}), exited: make(chan struct{}),
	}
	// Pipes of our own, not cmd's: Wait must not close stdout before the
	// last lines (the result) are read.
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("claude: starting %s: %w", s.name, err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, fmt.Errorf("claude: starting %s: %w", s.name, err)
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	if s.stdin, err = cmd.StdinPipe(); err == nil {
		err = cmd.Start()
	}
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return nil, fmt.Errorf("claude: starting %s in %s: %w", s.name, o.Dir, err)
	}
	s.stdout = outR
	s.stopCtx = context.AfterFunc(ctx, func() { _ = s.Close(0) })
	go s.read()
	go func() {
		defer close(s.stderrDone)
		_, _ = io.Copy(s.stderr, errR)
		errR.Close()
	}()
	go s.wait(errR)
	return s, nil
}

// lookPath finds name as the session would: in its own PATH.
func lookPath(name, pathEnv string) (string, error) {
	if strings.Contains(name, "/") {
		abs, err := filepath.Abs(name)
		if err == nil {
			err = executable(abs)
		}
		if err != nil {
			return "", fmt.Errorf("%w: %s: %v", ErrNotFound, name, err)
		}
		return abs, nil
	}
	for _, dir := range filepath.SplitList(pathEnv) {
		if !filepath.IsAbs(dir) {
			continue // a relative PATH entry would depend on Dir
		}
		if p := filepath.Join(dir, name); executable(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: %s: not found in PATH; install Claude Code (npm install -g @anthropic-ai/claude-code) or give the command's full path", ErrNotFound, name)
}

func executable(path string) error {
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return err
	case fi.IsDir():
		return fmt.Errorf("%s is a directory", path)
	case fi.Mode()&0o111 == 0:
		return fmt.Errorf("%s is not executable: %w", path, fs.ErrPermission)
	}
	return nil
}

// SessionID is the session's id, as the last init or result said (or
// Options.Resume before the first turn): what --resume takes.
func (s *Session) SessionID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessionID
}

// Pid is the process's id, which is also its process group's.
func (s *Session) Pid() int { return s.cmd.Process.Pid }

// userTurn is a user turn on stdin; content may also be a list of blocks.
type userTurn struct {
	Type    string `json:"type"`
	Message struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"message"`
}

// Send writes one user turn. A turn sent while one runs is queued by
// Claude Code and gets a result of its own.
func (s *Session) Send(text string) error {
	t := userTurn{Type: "user"}
	t.Message.Role, t.Message.Content = "user", text
	line, err := json.Marshal(t)
	if err != nil {
		return fmt.Errorf("claude: encoding a user turn: %w", err)
	}
	return s.write(line)
}

func (s *Session) write(line []byte) error {
	s.mu.Lock()
	closing := s.closing
	s.mu.Unlock()
	select {
	case <-s.exited:
		return fmt.Errorf("%w: %s has exited", ErrClosed, s.name)
	default:
	}
	if closing {
		return ErrClosed
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if _, err := s.stdin.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("%w: writing to %s: %v", ErrClosed, s.name, err)
	}
	return nil
}

// Interrupt stops the running turn and returns once Claude Code has
// acknowledged it; the turn's Result (Interrupted) still comes from Next.
// When no turn runs, Claude Code just acknowledges.
func (s *Session) Interrupt(ctx context.Context) error {
	id := "interrupt_" + rand.Text()
	answer := make(chan *ControlResponse, 1)
	s.mu.Lock()
	s.pending[id] = answer
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.pending, id)
		s.mu.Unlock()
	}()
	line, err := json.Marshal(map[string]any{"type": "control_request", "request_id": id,
		"request": map[string]string{"subtype": "interrupt"}})
	if err != nil {
		return fmt.Errorf("claude: encoding an interrupt: %w", err)
	}
	if err := s.write(line); err != nil {
		return err
	}
	select {
	case r := <-answer:
		return r.Err()
	case <-s.readerDone:
		select {
		case r := <-answer:
			return r.Err()
		default:
			return fmt.Errorf("%w: %s ended before acknowledging the interrupt", ErrClosed, s.name)
		}
	case <-ctx.Done():
		return fmt.Errorf("claude: interrupt not acknowledged: %w", ctx.Err())
	}
}

// Next is the next event. Once the output has ended it returns an
// *ExitError if the process failed, ErrClosed if Close ended it, and
// io.EOF if it exited with status 0 on its own.
func (s *Session) Next(ctx context.Context) (Event, error) {
	for {
		s.mu.Lock()
		if len(s.queue) > 0 {
			ev := s.queue[0]
			s.queue[0] = nil
			s.queue = s.queue[1:]
			if len(s.queue) > 0 {
				s.signal()
			}
			s.mu.Unlock()
			return ev, nil
		}
		s.mu.Unlock()
		select {
		case <-s.ready:
			continue
		case <-s.readerDone:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		s.mu.Lock()
		more := len(s.queue) > 0
		s.mu.Unlock()
		if more {
			continue
		}
		select {
		case <-s.exited:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return nil, s.end()
	}
}

// end is what Next returns once there is nothing more to read.
func (s *Session) end() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.endErr != nil:
		return s.endErr
	case s.readErr != nil:
		return fmt.Errorf("claude: reading %s's output: %w", s.name, s.readErr)
	case s.closing:
		return ErrClosed
	}
	return io.EOF
}

// signal wakes Next; s.mu is held.
func (s *Session) signal() {
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// read reads stdout to its end. Control responses go to the Interrupt
// waiting for them, so a caller that is not reading cannot hold one up.
func (s *Session) read() {
	defer close(s.readerDone)
	err := readLines(s.stdout, MaxLineBytes, func(ev Event) {
		s.mu.Lock()
		defer s.mu.Unlock()
		switch e := ev.(type) {
		case *ControlResponse:
			if w, ok := s.pending[e.RequestID]; ok {
				delete(s.pending, e.RequestID)
				w <- e
				return
			}
		case *Init:
			s.sessionID = e.SessionID
		case *Result:
			s.sessionID, s.lastFailed = e.SessionID, e.IsError
		}
		s.queue = append(s.queue, ev)
		s.signal()
	})
	s.stdout.Close()
	if err != nil && !errors.Is(err, os.ErrClosed) {
		s.mu.Lock()
		s.readErr = err
		s.mu.Unlock()
	}
}

// wait reaps the process and decides how it ended.
func (s *Session) wait(stderr *os.File) {
	err := s.cmd.Wait()
	// Whatever it left in its group goes with it. Right after the reap
	// the group id cannot have been reused.
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	s.stopCtx()
	for _, p := range []struct {
		done <-chan struct{}
		f    *os.File
	}{{s.stderrDone, stderr}, {s.readerDone, s.stdout}} {
		select {
		case <-p.done:
		case <-time.After(drainGrace):
			p.f.Close() // held open by a process outside the group
			<-p.done
		}
	}
	s.mu.Lock()
	if err != nil {
		e := &ExitError{Command: s.name, Code: -1, Stopped: s.stopped, Stderr: s.stderr.String(), Err: err}
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			e.Code = ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				e.Signal = ws.Signal()
			}
		}
		s.waitErr, s.endErr = e, e
		// Asked for: signalled by Close, or stdin closed after a failed
		// turn (the CLI's status then repeats that turn's failure).
		if e.Stopped || s.closing && e.Code == 1 && s.lastFailed {
			s.endErr = nil
		}
	}
	s.mu.Unlock()
	close(s.exited)
}

// Close ends the session: it closes stdin, which lets Claude Code finish
// the running turn and exit, waits up to grace, then sends SIGTERM to the
// process group, waits up to grace again, then SIGKILL. It returns nil when
// the process ended as asked, else its *ExitError. Calling it again returns
// the same.
func (s *Session) Close(grace time.Duration) error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closing = true
		s.mu.Unlock()
		_ = s.stdin.Close()
		for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
			if s.exitedWithin(grace) {
				break
			}
			s.mu.Lock()
			s.stopped = true
			s.mu.Unlock()
			_ = syscall.Kill(-s.cmd.Process.Pid, sig)
		}
		<-s.exited
		s.mu.Lock()
		s.closeErr = s.endErr
		s.mu.Unlock()
	})
	return s.closeErr
}

func (s *Session) exitedWithin(d time.Duration) bool {
	select {
	case <-s.exited:
		return true
	default:
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-s.exited:
		return true
	case <-t.C:
		return false
	}
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
