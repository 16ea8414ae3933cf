package butler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/audit"
	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/services/runner/claude"
)

// runner starts Claude Code headless for the messages of a butler with a
// run block that no connected session takes (docs/runner.md): one run per
// conversation (or one for all, sessions: one), each message a user turn,
// the conversation's Claude Code session kept in herald_requests so a run
// that ended resumes it.
type runner struct {
	b *Butler

	mu   sync.Mutex
	runs map[string]*run // by conversation
	// told are the requests whose sender was told they wait for a free
	// run, so the sentence goes once.
	told map[string]bool

	// hostMu guards checked and hostErr: whether this machine can start
	// the run block checked (CheckRunHost), asked again when it changes.
	hostMu  sync.Mutex
	checked *config.Run
	hostErr error
}

// run is one Claude Code process for a conversation.
type run struct {
	conv    string
	sess    *claude.Session
	token   string
	mcpFile string
	started time.Time
	// What the run has done, under runner.mu: turns finished, spend so far
	// (Claude Code's total), the requests whose turns are in flight in the
	// order written, and those the model replied to itself.
	turns   int
	cost    float64
	last    time.Time
	pending []string
	replied map[string]bool
	ending  string // why it is being ended, set by whoever ends it
	done    chan struct{}
}

// Why a run ended, as run_ended's reason says.
const (
	endIdle    = "idle"
	endStopped = "stopped from chat (/stop)"
	endNew     = "a new session was asked for (/new)"
	endShut    = "the butler stopped"
)

// errRunsFull: every run the butler may keep is busy; errNotStarted:
// Claude Code did not start, and the sender was told. The message waits.
var (
	errRunsFull   = errors.New("every run is busy")
	errNotStarted = errors.New("the run did not start")
)

func newRunner(b *Butler) *runner {
	return &runner{b: b, runs: map[string]*run{}, told: map[string]bool{}}
}

// settings is the butler's run block, nil if it has none, it was
// removed from the configuration (retired), or this machine cannot start
// it (claude or the project missing: a fleet's butler container, where
// messages wait for herald run).
func (r *runner) settings() *config.Run {
	cfg := r.b.config()
	bc := cfg.Butler(r.b.name)
	if bc == nil || bc.Run == nil || r.b.Retired() {
		return nil
	}
	r.hostMu.Lock()
	defer r.hostMu.Unlock()
	if r.checked != bc.Run {
		r.checked, r.hostErr = bc.Run, cfg.CheckRunHost(r.b.name, r.b.dir)
		if r.hostErr != nil {
			r.b.log.Warn("the butler's run block cannot start Claude Code here; messages no session takes wait (for herald run where the project is)", "err", r.hostErr)
		}
	}
	if r.hostErr != nil {
		return nil
	}
	return bc.Run
}

// state is the runner's part of the butler's status: nil without a run
// block.
func (r *runner) state() *RunnerStatus {
	bc := r.b.config().Butler(r.b.name)
	if bc == nil || bc.Run == nil || r.b.Retired() {
		return nil
	}
	st := &RunnerStatus{}
	if r.settings() == nil {
		r.hostMu.Lock()
		if r.hostErr != nil {
			st.Unavailable = r.hostErr.Error()
		}
		r.hostMu.Unlock()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ru := range r.runs {
		st.Runs++
		if len(ru.pending) > 0 {
			st.Working++
		}
	}
	return st
}

// conversation is the key of the run message in goes to.
func (r *runner) conversation(in *envelope.Ingress) string {
	if s := r.settings(); s != nil && s.Sessions == config.SessionsOne {
		return "all"
	}
	conv := in.IntegrationID + ":" + chatOf(in)
	if t := in.Meta["thread_id"]; t != "" {
		conv += ":" + t
	}
	return conv
}

// take hands a message no session took to its conversation's run,
// starting one if needed; a chat command is answered instead. errRunsFull
// leaves the message waiting.
func (r *runner) take(ctx context.Context, v *channelMessage) error {
	id := v.Meta["request_id"]
	conv := r.conversation(v.in)
	if cmd, ok := chatCommand(v.Content); ok {
		r.command(ctx, conv, id, cmd)
		return nil
	}
	r.mu.Lock()
	ru := r.runs[conv]
	ending := ru != nil && ru.ending != ""
	r.mu.Unlock()
	if ending {
		// Being ended (idle, /stop): the message goes to the next run.
		<-ru.done
		ru = nil
	}
	if ru == nil {
		var err error
		if ru, err = r.start(ctx, conv, id); err != nil {
			return err
		}
	}
	r.mu.Lock()
	ru.pending = append(ru.pending, id)
	ru.last = time.Now()
	delete(r.told, id)
	inFlight := slices.Clone(ru.pending)
	r.mu.Unlock()
	r.pending(ctx, conv, inFlight)
	if err := ru.sess.Send(userTurn(v)); err != nil {
		r.mu.Lock()
		ru.pending = slices.DeleteFunc(ru.pending, func(x string) bool { return x == id })
		r.mu.Unlock()
		return fmt.Errorf("%w: writing the message to the run: %w", envelope.ErrTargetUnavailable, err)
	}
	r.b.log.InfoContext(ctx, "inbound message given to the run", "request_id", id, "conversation", conv)
	return nil
}

// start starts the run of conversation conv for request id's message.
func (r *runner) start(ctx context.Context, conv, id string) (*run, error) {
	s := r.settings()
	r.mu.Lock()
	if len(r.runs) >= s.MaxSessions {
		first := !r.told[id]
		r.told[id] = true
		r.mu.Unlock()
		if first {
			r.tell(ctx, id, fmt.Sprintf("The agent is busy with %d other conversations; your message waits and goes in when one ends.", s.MaxSessions))
		}
		return nil, errRunsFull
	}
	r.mu.Unlock()
	url := r.b.mcpURL()
	if url == "" {
		return nil, fmt.Errorf("%w: the butler serves no MCP over HTTP yet, which a run connects to", envelope.ErrTargetUnavailable)
	}
	orphans, err := r.claim(ctx, conv)
	switch {
	case errors.Is(err, errHeldElsewhere):
		return nil, err
	case err != nil:
		return nil, fmt.Errorf("%w: taking the conversation's run: %w", envelope.ErrTargetUnavailable, err)
	}
	r.orphaned(ctx, orphans)
	resume := r.sessionOf(ctx, conv)
	tok := r.b.access.runToken(conv)
	file, err := writeMCPConfig(r.b.dir, r.b.name, url, tok)
	if err != nil {
		r.b.access.dropRunToken(tok)
		r.release(ctx, conv)
		return nil, fmt.Errorf("%w: writing the run's MCP configuration: %w", envelope.ErrTargetUnavailable, err)
	}
	o := claude.Options{
		Command: s.Command, Args: s.Args, Dir: s.DirIn(r.b.dir), Env: s.Environ(os.Getenv),
		Model: s.Model, PermissionMode: s.PermissionMode, MaxBudgetUSD: s.MaxBudgetUSD,
		MCPConfig: file, StrictMCPConfig: true, PermissionPromptTool: "mcp__" + runServer + "__" + ApproveTool,
		AllowedTools: runAllowedTools(), Resume: resume,
	}
	sess, err := claude.Start(context.WithoutCancel(ctx), o)
	if err != nil {
		r.b.access.dropRunToken(tok)
		_ = os.Remove(file)
		r.release(ctx, conv)
		r.b.log.ErrorContext(ctx, "the run did not start; the message waits", "conversation", conv, "err", err)
		r.mu.Lock()
		first := !r.told[id]
		r.told[id] = true
		r.mu.Unlock()
		if first {
			r.audit(ctx, audit.RunEnded, id, "did not start: "+err.Error())
			r.tell(ctx, id, "The agent could not be started ("+firstLine(err)+"); your message waits, and the operator has the details.")
		}
		return nil, errNotStarted
	}
	ru := &run{conv: conv, sess: sess, token: tok, mcpFile: file, started: time.Now(), last: time.Now(), replied: map[string]bool{}, done: make(chan struct{})}
	r.mu.Lock()
	r.runs[conv] = ru
	r.mu.Unlock()
	how := "a new session"
	if resume != "" {
		how = "resuming session " + resume
	}
	r.b.log.InfoContext(ctx, "run started", "conversation", conv, "pid", sess.Pid(), "session", how)
	r.audit(ctx, audit.RunStarted, id, how)
	go r.follow(ru)
	return ru, nil
}

// follow reads a run's events until it ends.
func (r *runner) follow(ru *run) {
	ctx := context.Background()
	defer close(ru.done)
	told := false
	kept := "" // the session id last kept
	for {
		ev, err := ru.sess.Next(ctx)
		if err != nil {
			r.ended(ctx, ru, err)
			return
		}
		switch e := ev.(type) {
		case *claude.Init:
			if e.SessionID != "" && e.SessionID != kept {
				kept = e.SessionID
				r.keepSession(ctx, ru.conv, e.SessionID)
			}
		case *claude.Result:
			r.finished(ctx, ru, e)
		case *claude.BadLine:
			r.b.log.WarnContext(ctx, "the run wrote a line Herald cannot read", "conversation", ru.conv, "excerpt", e.Excerpt, "err", e.Err)
			if id := ru.current(&r.mu); id != "" && !told {
				told = true
				r.tell(ctx, id, "The agent wrote something Herald could not read; it goes on, but an answer may be missing.")
			}
		}
	}
}

// current is the request whose turn runs now, "" if none.
func (ru *run) current(mu *sync.Mutex) string {
	mu.Lock()
	defer mu.Unlock()
	if len(ru.pending) == 0 {
		return ""
	}
	return ru.pending[0]
}

// finished is a turn's end: the model's final text goes back as the reply
// when it did not reply itself (relay_result), a failed turn is told.
func (r *runner) finished(ctx context.Context, ru *run, e *claude.Result) {
	r.mu.Lock()
	ru.turns++
	ru.cost = e.TotalCostUSD
	id := ""
	if len(ru.pending) > 0 {
		id, ru.pending = ru.pending[0], ru.pending[1:]
	}
	replied := ru.replied[id]
	delete(ru.replied, id)
	stopping := ru.ending != ""
	inFlight := slices.Clone(ru.pending)
	r.mu.Unlock()
	if id == "" {
		return
	}
	r.pending(ctx, ru.conv, inFlight)
	switch err := e.Err(); {
	case e.Interrupted() || stopping:
	case err != nil:
		r.b.log.WarnContext(ctx, "a turn of the run failed", "conversation", ru.conv, "request_id", id, "subtype", e.Subtype, "err", err)
		r.tell(ctx, id, turnFailed(e))
	case !replied && strings.TrimSpace(e.Result) != "" && r.settings() != nil && r.settings().Relays():
		if res := r.b.answer(ctx, id, envelope.Delivery{Intent: envelope.IntentReply, Message: e.Result}); res.IsError {
			r.b.log.WarnContext(ctx, "the turn's final text was not sent as the reply", "request_id", id, "answer", resultText(res))
		}
	}
}

// turnFailed is the sentence a person reads for a turn that failed.
func turnFailed(e *claude.Result) string {
	if e.Subtype == claude.ResultErrorMaxBudgetUSD {
		return "The agent stopped: this session reached its spending cap (run.max_budget_usd). Send /new to start a fresh session."
	}
	return "The agent could not finish: " + strings.TrimPrefix(e.Err().Error(), claude.ErrTurn.Error()+": ") + "."
}

// ended is a run's end: audited, its sender told if a turn was cut short,
// its token and file gone.
func (r *runner) ended(ctx context.Context, ru *run, err error) {
	r.mu.Lock()
	if r.runs[ru.conv] == ru {
		delete(r.runs, ru.conv)
	}
	why, cut := ru.ending, slices.Clone(ru.pending)
	r.mu.Unlock()
	r.b.access.dropRunToken(ru.token)
	_ = os.Remove(ru.mcpFile)
	r.release(ctx, ru.conv)
	if why == "" {
		why = "exited"
		if ee, ok := errors.AsType[*claude.ExitError](err); ok {
			why = "exited: " + firstLine(ee)
		}
	}
	r.b.log.InfoContext(ctx, "run ended", "conversation", ru.conv, "reason", why, "turns", ru.turns, "cost_usd", ru.cost)
	first := ""
	if len(cut) > 0 {
		first = cut[0]
	}
	r.audit(ctx, audit.RunEnded, first, why)
	if ru.ending == "" || ru.ending == endShut {
		for _, id := range cut {
			r.tell(ctx, id, "The agent's run ended before it answered ("+why+"); your next message resumes the session.")
		}
	}
	r.b.channel.poke() // a message waiting for a free run
}

// stop ends conversation conv's run, if one runs: its turn interrupted,
// then the process closed. It reports whether there was one.
func (r *runner) stop(ctx context.Context, conv, why string) bool {
	r.mu.Lock()
	ru := r.runs[conv]
	if ru != nil && ru.ending == "" {
		ru.ending = why
	}
	busy := ru != nil && len(ru.pending) > 0
	r.mu.Unlock()
	if ru == nil {
		return false
	}
	if busy {
		ictx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if err := ru.sess.Interrupt(ictx); err != nil {
			r.b.log.WarnContext(ctx, "the run's turn was not interrupted; closing it", "conversation", conv, "err", err)
		}
		cancel()
	}
	_ = ru.sess.Close(5 * time.Second)
	<-ru.done
	return true
}

// tick ends the runs idle for run.idle_exit.
func (r *runner) tick(ctx context.Context, now time.Time) {
	s := r.settings()
	var idle []string
	r.mu.Lock()
	for conv, ru := range r.runs {
		if ru.ending == "" && len(ru.pending) == 0 && (s == nil || now.Sub(ru.last) >= time.Duration(s.IdleExit)) {
			ru.ending = endIdle // no message joins it from now on (take)
			idle = append(idle, conv)
		}
	}
	r.mu.Unlock()
	for _, conv := range idle {
		r.stop(ctx, conv, endIdle)
	}
}

// loop ends idle runs until ctx ends, then every run.
func (r *runner) loop(ctx context.Context) {
	// The MCP configurations a killed process left: their tokens died with
	// it, and Claude Code read them when it started.
	if old, _ := filepath.Glob(filepath.Join(r.b.dir, ".herald", "runs", r.b.name, "mcp-*.json")); len(old) > 0 {
		for _, f := range old {
			_ = os.Remove(f)
		}
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	var renewed time.Time
	for {
		select {
		case now := <-t.C:
			if r.settings() == nil {
				continue
			}
			r.tick(ctx, now)
			if now.Sub(renewed) >= leaseRenew {
				renewed = now
				r.renew(ctx, now)
			}
		case <-ctx.Done():
			r.mu.Lock()
			convs := make([]string, 0, len(r.runs))
			for conv := range r.runs {
				convs = append(convs, conv)
			}
			r.mu.Unlock()
			for _, conv := range convs {
				r.stop(context.Background(), conv, endShut)
			}
			return
		}
	}
}

// runnerWordKey marks the context of a reply that is the runner's own
// word (tell), not the model's answer.
type runnerWordKey struct{}

// repliedTo records that the model replied to request id itself, unless
// ctx is the runner's own word.
func (r *runner) repliedTo(ctx context.Context, id string) {
	if ctx.Value(runnerWordKey{}) != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ru := range r.runs {
		if slices.Contains(ru.pending, id) {
			ru.replied[id] = true
		}
	}
}

// The chat commands a run answers itself.
const runHelp = "/new: the next message starts a fresh session\n/stop: stop what the agent is doing and end its run\n/status: what runs for this conversation\n/help: this list\nAnything else goes to the agent."

// chatCommand is the command a message is, if it is one of the runner's.
func chatCommand(text string) (string, bool) {
	w := strings.ToLower(strings.TrimSpace(text))
	if f := strings.Fields(w); len(f) == 1 {
		w = f[0]
	}
	switch w {
	case "/new", "/stop", "/status", "/help":
		return w, true
	}
	return "", false
}

// command answers a chat command of conversation conv, from request id.
func (r *runner) command(ctx context.Context, conv, id, cmd string) {
	var text string
	switch cmd {
	case "/help":
		text = runHelp
	case "/stop":
		if r.stop(ctx, conv, endStopped) {
			text = "Stopped. Your next message resumes the session."
		} else {
			text = "Nothing is running for this conversation."
		}
	case "/new":
		r.stop(ctx, conv, endNew)
		r.keepSession(ctx, conv, "")
		text = "Done: your next message starts a new session."
	case "/status":
		text = r.status(ctx, conv)
	}
	if res := r.b.answer(ctx, id, envelope.Delivery{Intent: envelope.IntentReply, Message: text}); res.IsError {
		r.b.log.WarnContext(ctx, "a chat command's answer was not sent", "command", cmd, "answer", resultText(res))
	}
}

// status is /status's answer.
func (r *runner) status(ctx context.Context, conv string) string {
	s := r.settings()
	r.mu.Lock()
	ru := r.runs[conv]
	var since time.Time
	var turns int
	var cost float64
	var working bool
	if ru != nil {
		since, turns, cost, working = ru.started, ru.turns, ru.cost, len(ru.pending) > 0
	}
	r.mu.Unlock()
	if ru == nil {
		if id := r.sessionOf(ctx, conv); id != "" {
			return "Nothing is running; your next message resumes session " + id + "."
		}
		return "Nothing is running; your next message starts a new session."
	}
	state := "waiting for your message"
	if working {
		state = "working"
	}
	spend := fmt.Sprintf("$%.4f spent", cost)
	if s != nil && s.MaxBudgetUSD > 0 {
		spend += fmt.Sprintf(" of $%.2f", s.MaxBudgetUSD)
	}
	return fmt.Sprintf("Running since %s (%s), %s: %d turns, %s; session %s.",
		since.UTC().Format("15:04 UTC"), time.Since(since).Round(time.Second), state, turns, spend, ru.sess.SessionID())
}

// tell sends text as the reply to request id: what the runner has to say
// to the person (a wait, a failure), never the model's words.
func (r *runner) tell(ctx context.Context, id, text string) {
	ctx = context.WithValue(ctx, runnerWordKey{}, true)
	if res := r.b.answer(ctx, id, envelope.Delivery{Intent: envelope.IntentReply, Message: text}); res.IsError {
		r.b.log.WarnContext(ctx, "the runner's word to the person was not sent", "request_id", id, "text", text, "answer", resultText(res))
	}
}

func (r *runner) audit(ctx context.Context, kind, id, reason string) {
	r.b.audit.Write(ctx, audit.Record{Kind: kind, Butler: r.b.name, RequestID: id, Reason: reason})
}

// The conversation's Claude Code session, kept in herald_requests beside
// the butler's messages (its NATS user writes only its own keys there).
func sessionKey(butler, conv string) string { return butler + ".run." + bus.KeyToken(conv) }

type keptSession struct {
	SessionID string    `json:"session_id"`
	At        time.Time `json:"at"`
}

func (r *runner) sessionOf(ctx context.Context, conv string) string {
	e, err := r.b.channel.requests.Get(ctx, sessionKey(r.b.name, conv))
	if err != nil {
		if !errors.Is(err, jetstream.ErrKeyNotFound) {
			r.b.log.WarnContext(ctx, "the conversation's session could not be read; a new one starts", "conversation", conv, "err", err)
		}
		return ""
	}
	var k keptSession
	if err := json.Unmarshal(e.Value(), &k); err != nil {
		return ""
	}
	return k.SessionID
}

// keepSession records id as conversation conv's session; "" forgets it
// (/new).
func (r *runner) keepSession(ctx context.Context, conv, id string) {
	b, _ := json.Marshal(keptSession{SessionID: id, At: time.Now().UTC()})
	if _, err := r.b.channel.requests.Put(ctx, sessionKey(r.b.name, conv), b); err != nil {
		r.b.log.WarnContext(ctx, "the conversation's session was not kept; a run after this one starts anew", "conversation", conv, "err", err)
	}
}

// runServer is the name the run's Claude Code knows the butler by.
const runServer = "herald"

// runAllowedTools are the butler's tools a run uses without asking anyone:
// answering the person is what it is for.
func runAllowedTools() []string {
	var out []string
	for _, t := range []string{"reply", "react", "edit", "ask", "notify", "inbox", "history", "download_attachment", "channel_list", "channel_status"} {
		out = append(out, "mcp__"+runServer+"__"+t)
	}
	sort.Strings(out)
	return out
}

// writeMCPConfig writes the run's --mcp-config: the butler at url, with
// the run's token, readable by this user only.
func writeMCPConfig(dir, butler, url, tok string) (string, error) {
	d := filepath.Join(dir, ".herald", "runs", butler)
	if err := os.MkdirAll(d, 0o700); err != nil {
		return "", err
	}
	b, err := json.Marshal(map[string]any{"mcpServers": map[string]any{runServer: map[string]any{
		"type": "http", "url": url, "headers": map[string]string{"Authorization": "Bearer " + tok},
	}}})
	if err != nil {
		return "", err
	}
	f, err := os.CreateTemp(d, "mcp-*.json")
	if err != nil {
		return "", err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return "", err
	}
	return f.Name(), f.Close()
}

// userTurn is a message as the run reads it: in the tag Claude Code gives
// a channel message, so the model answers it the same way.
func userTurn(v *channelMessage) string {
	keys := make([]string, 0, len(v.Meta))
	for k := range v.Meta {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(`<channel source="` + runServer + `"`)
	for _, k := range keys {
		b.WriteString(" " + k + `="` + html.EscapeString(v.Meta[k]) + `"`)
	}
	b.WriteString(">\n" + v.Content + "\n</channel>")
	return b.String()
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

// resultText is a tool result's text, for a log line.
func resultText(res *mcp.CallToolResult) string {
	var out string
	for _, c := range res.Content {
		out += mcp.GetTextFromContent(c)
	}
	return out
}
