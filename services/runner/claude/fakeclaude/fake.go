package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// childEnv marks the child that script.SpawnChild starts.
const childEnv = "FAKECLAUDE_CHILD"

// exit ends the process with a status.
type exit int

func (e exit) Error() string { return "exit " + strconv.Itoa(int(e)) }

// fake is one session of the stand-in. Everything but reading stdin runs on
// one goroutine, so the output is written in order.
type fake struct {
	flags      flags
	script     *script
	dir        string
	sessionID  string
	model      string
	mcpServers []mcpServer
	mcp        map[string]*mcpConn // connected servers, by name
	budget     float64
	out        io.Writer
	stderr     io.Writer
	log        *logger

	input chan input
	sigs  chan os.Signal

	queue      []string // prompts waiting for their turn
	turns      int      // turns started
	cost       float64  // running total, as total_cost_usd
	lastFailed bool
	eof        bool
}

type input struct {
	line []byte
	eof  bool
}

func run(args []string, getenv func(string) string, stdin io.Reader, stdout, stderr *os.File) int {
	lg := openLog(getenv("FAKECLAUDE_LOG"))
	defer lg.close()
	dir, _ := os.Getwd()
	lg.write(obj{"kind": "start", "argv": args, "dir": dir, "env": os.Environ(), "pid": os.Getpid()})
	code := 0
	if err := serve(args, getenv, dir, lg, stdin, stdout, stderr); err != nil {
		var e exit
		if !errors.As(err, &e) {
			fmt.Fprintln(stderr, err)
			e = 1
		}
		code = int(e)
	}
	lg.write(obj{"kind": "exit", "code": code})
	return code
}

func serve(args []string, getenv func(string) string, dir string, lg *logger, stdin io.Reader, stdout, stderr *os.File) error {
	fl, err := parseFlags(args)
	if err == nil {
		err = fl.check()
	}
	if err != nil {
		return err
	}
	sc, err := loadScript(getenv("FAKECLAUDE_SCRIPT"))
	if err != nil {
		return err
	}
	servers, err := mcpServers(fl["--mcp-config"])
	if err != nil {
		return err
	}
	f := &fake{flags: fl, script: sc, dir: dir, mcpServers: servers, mcp: map[string]*mcpConn{}, budget: fl.budget(),
		out: stdout, stderr: stderr, log: lg, input: make(chan input), sigs: make(chan os.Signal, 1)}
	f.model = firstOf(fl.last("--model"), sc.Model, "claude-opus-5-5")
	f.sessionID = firstOf(fl.last("--resume"), fl.last("--session-id"), sc.SessionID, uuid())
	signal.Notify(f.sigs, syscall.SIGTERM)
	if sc.SpawnChild {
		if err := f.spawnChild(stdout); err != nil {
			return err
		}
	}
	if fl.has("--resume") && sc.UnknownResume {
		return f.unknownResume()
	}
	go f.readStdin(stdin)
	return f.loop()
}

func firstOf(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// readStdin hands the main loop each line of stdin, then its end.
func (f *fake) readStdin(r io.Reader) {
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		line, err := br.ReadBytes('\n')
		if l := strings.TrimSpace(string(line)); l != "" {
			f.log.write(obj{"kind": "stdin", "line": l})
			f.input <- input{line: []byte(l)}
		}
		if err != nil {
			f.log.write(obj{"kind": "eof"})
			f.input <- input{eof: true}
			return
		}
	}
}

// loop runs turns as they come until stdin ends and the last turn is done.
func (f *fake) loop() error {
	for {
		if len(f.queue) > 0 {
			p := f.queue[0]
			f.queue = f.queue[1:]
			if err := f.turn(p); err != nil {
				return err
			}
			continue
		}
		if f.eof && !f.script.IgnoreEOF {
			f.closeMCP()
			if f.lastFailed {
				return exit(1) // the real CLI's status repeats the last turn's
			}
			return nil
		}
		in, _, err := f.next(nil)
		if err != nil {
			return err
		}
		if _, err := f.handle(in, false); err != nil {
			return err
		}
	}
}

// next waits for a line of stdin or for done (nil: never), handling SIGTERM.
func (f *fake) next(done <-chan struct{}) (input, bool, error) {
	in := f.input
	if f.eof {
		in = nil // read to its end: only signals and the timer remain
	}
	for {
		select {
		case i := <-in:
			return i, false, nil
		case <-done:
			return input{}, true, nil
		case sig := <-f.sigs:
			f.log.write(obj{"kind": "signal", "signal": sig.String()})
			if !f.script.IgnoreSIGTERM {
				return input{}, false, exit(143) // as the real CLI: 128+15
			}
		}
	}
}

// handle takes one line of stdin; busy says a turn runs, which an
// interrupt then ends (interrupted true).
func (f *fake) handle(in input, busy bool) (interrupted bool, err error) {
	if in.eof {
		f.eof = true
		return false, nil
	}
	var msg struct {
		Type      string `json:"type"`
		RequestID string `json:"request_id"`
		Request   struct {
			Subtype string `json:"subtype"`
		} `json:"request"`
		Message struct {
			Content json.RawMessage `json:"content"`
		} `json:"message"`
	}
	if err := json.Unmarshal(in.line, &msg); err != nil {
		fmt.Fprintf(f.stderr, "Error parsing streaming input line (type=unknown, %d chars): SyntaxError\n", len(in.line))
		return false, exit(1)
	}
	switch msg.Type {
	case "user":
		f.queue = append(f.queue, promptText(msg.Message.Content))
	case "control_request":
		if msg.Request.Subtype != "interrupt" {
			f.write(controlError(msg.RequestID, "Unsupported control request subtype: "+msg.Request.Subtype, "unsupported_request"))
			return false, nil
		}
		f.write(controlSuccess(msg.RequestID))
		return busy, nil
	}
	return false, nil
}

// promptText is a user turn's text: a string, or its text blocks.
func promptText(content json.RawMessage) string {
	var s string
	if json.Unmarshal(content, &s) == nil {
		return s
	}
	var blocks []struct {
		Type, Text string
	}
	_ = json.Unmarshal(content, &blocks)
	var parts []string
	for _, b := range blocks {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// turn plays one turn of the script.
func (f *fake) turn(prompt string) error {
	t := f.script.turn(f.turns)
	f.turns++
	start := time.Now()
	f.write(f.init())
	if t.BadLine != "" {
		fmt.Fprintln(f.out, t.BadLine)
	}
	if f.budget > 0 && f.cost >= f.budget {
		f.budgetExhausted(start, nil) // refused without asking the API
		return nil
	}
	if t.ExitCode != 0 {
		fmt.Fprint(f.stderr, t.Stderr)
		return exit(t.ExitCode)
	}
	if t.APIError != "" {
		f.write(f.apiErrorMessage(t.APIError))
		f.write(f.result("success", true, time.Since(start), obj{"result": "API Error: 400 " + t.APIError,
			"api_error_status": 400, "stop_reason": "stop_sequence", "terminal_reason": "api_error"}))
		f.lastFailed = true
		return nil
	}
	if t.SleepMS > 0 {
		interrupted, err := f.sleep(time.Duration(t.SleepMS) * time.Millisecond)
		if err != nil {
			return err
		}
		if interrupted {
			f.streamInterrupted(start, t.Partial)
			return nil
		}
	}
	tools, err := f.runSteps(f.steps(t, requestID(prompt)))
	if err != nil {
		return err
	}
	if tools.interrupted {
		f.toolsInterrupted(start, tools)
		return nil
	}
	f.answer(start, t, prompt, tools)
	return nil
}

// answer ends a turn that ran its course with the model's last message.
func (f *fake) answer(start time.Time, t turn, prompt string, tools outcome) {
	reply := t.Reply
	switch {
	case reply != "":
	case len(tools.denied) > 0:
		reply = "Denied: " + strings.Join(tools.denied, "\nDenied: ")
	case tools.calls > 0:
		reply = "Done."
	default:
		reply = "Answer to: " + prompt
	}
	if pad := t.LongLineBytes - len(reply); pad > 0 {
		reply += strings.Repeat("x", pad)
	}
	f.write(f.assistant(reply, false))
	if t.CostUSD != nil {
		f.cost += *t.CostUSD
	} else {
		f.cost += 0.00072
	}
	if f.budget > 0 && f.cost >= f.budget {
		f.budgetExhausted(start, "end_turn")
		return
	}
	f.write(f.result("success", false, time.Since(start), obj{"result": reply, "num_turns": 1 + tools.calls,
		"permission_denials": tools.denials}))
	f.lastFailed = false
}

// streamInterrupted ends a turn whose answer an interrupt cut short.
func (f *fake) streamInterrupted(start time.Time, partial string) {
	if partial != "" {
		f.write(f.assistant(partial, true))
	}
	f.write(f.userText("[Request interrupted by user]"))
	f.write(f.result("error_during_execution", true, time.Since(start), obj{"stop_reason": nil,
		"terminal_reason": "aborted_streaming", "num_turns": 2,
		"errors": []string{"[ede_diagnostic] result_type=user last_content_type=n/a stop_reason=null"}}))
	f.lastFailed = true
}

// sleep is a long turn: it waits d, taking stdin meanwhile, unless an
// interrupt comes first.
func (f *fake) sleep(d time.Duration) (interrupted bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return f.await(ctx.Done())
}

// await takes stdin while the turn waits for done, until done is closed
// or an interrupt ends the turn.
func (f *fake) await(done <-chan struct{}) (interrupted bool, err error) {
	for {
		in, finished, err := f.next(done)
		if err != nil || finished {
			return false, err
		}
		if interrupted, err := f.handle(in, true); interrupted || err != nil {
			return interrupted, err
		}
	}
}

// async runs fn, which may block for as long as a person takes to answer,
// while taking stdin. An interrupt cancels fn's context and returns once
// fn has; on an error (SIGTERM) fn is left to the process's end.
func (f *fake) async(fn func(ctx context.Context)) (interrupted bool, err error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(ctx)
	}()
	interrupted, err = f.await(done)
	if interrupted {
		cancel()
		<-done
	}
	return interrupted, err
}

func (f *fake) budgetExhausted(start time.Time, stopReason any) {
	f.write(f.result("error_max_budget_usd", true, time.Since(start), obj{"stop_reason": stopReason,
		"terminal_reason": "budget_exhausted",
		"errors":          []string{"Reached maximum budget ($" + strconv.FormatFloat(f.budget, 'f', -1, 64) + ")"}}))
	f.lastFailed = true
}

// unknownResume is --resume of an id with no conversation.
func (f *fake) unknownResume() error {
	msg := "No conversation found with session ID: " + f.sessionID
	f.write(f.result("error_during_execution", true, 0, obj{"num_turns": 0, "stop_reason": nil,
		"terminal_reason": nil, "errors": []string{msg}}))
	fmt.Fprintln(f.stderr, msg)
	return exit(1)
}

// spawnChild starts a process in fakeclaude's group that ignores SIGTERM
// and holds stdout open.
func (f *fake) spawnChild(stdout *os.File) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	c := exec.Command(self)
	c.Env = append(os.Environ(), childEnv+"=1")
	c.Stdout = stdout
	if err := c.Start(); err != nil {
		return err
	}
	f.log.write(obj{"kind": "child", "pid": c.Process.Pid})
	return nil
}

func child() {
	signal.Ignore(syscall.SIGTERM)
	for {
		time.Sleep(time.Hour)
	}
}

func (f *fake) write(v obj) {
	b, _ := json.Marshal(v)
	_, _ = f.out.Write(append(b, '\n'))
}

// logger appends JSON lines to FAKECLAUDE_LOG; with none it drops them.
type logger struct {
	mu sync.Mutex
	f  *os.File
}

func openLog(path string) *logger {
	lg := &logger{}
	if path != "" {
		lg.f, _ = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	}
	return lg
}

func (lg *logger) write(v obj) {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	if lg.f == nil {
		return
	}
	b, _ := json.Marshal(v)
	_, _ = lg.f.Write(append(b, '\n'))
}

func (lg *logger) close() {
	if lg.f != nil {
		lg.f.Close()
	}
}
