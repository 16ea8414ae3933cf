package reload

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// Subjects of `herald reload`. The operator's herald publishes a check, then
// an apply, each with a nonce of its own; every process answers on
// Identity.Subject, which names the process's NATS connection. NATS tells a
// subscriber nothing of who published, but it checks who may publish where:
// the generated permissions (pkg/natsauth) let each user publish only the
// answers of its own connection, so the name an answer shows is proved by
// its subject, never taken from its body. The requests carry no reply
// subject, so there is no inbox any user may answer on. The subject's last
// token is the process's instance (Self), which tells replicas of one
// connection apart; a process applying a file beats on its answer subject
// (Answer.State), so that its silence is news within Silence.
const (
	CheckSubject = "herald.control.reload.check"
	ApplySubject = "herald.control.reload.apply"
	// AllAnswers are the answers to every request:
	// herald.control.reload.answer.<nonce>.<connection>.<instance>.
	AllAnswers = answerRoot + ".>"
	answerRoot = "herald.control.reload.answer"
)

// AnswerSubjects is what the NATS user of connection conn may publish: its
// own answers, to any request, from any of its instances (one token).
func AnswerSubjects(conn string) string { return answerRoot + ".*." + conn + ".*" }

// Identity is who answers a reload.
type Identity struct {
	// Conn is the process's NATS connection name (bus.Connect):
	// "switchboard", "messenger", "butler.<name>", "herald-dev". The
	// generated permissions tie it to the process's user, as they tie its
	// inbox, _INBOX.<conn>.
	Conn string
	// Instance tells two processes of one connection name apart (two
	// messengers under one user, on one host or in two containers of one
	// hostname): Self's is <host>-<pid>-<random>, made once per process.
	// The permissions prove only Conn: processes sharing a NATS user could
	// take each other's instance, as they share every other right.
	Instance string
}

// Self is the identity this process answers with when connected as conn.
func Self(conn string) Identity { return Identity{Conn: conn, Instance: self()} }

// self is this process's instance: its host as one subject token, its pid
// (which finds it on its host), and 24 random bits (pids repeat: every
// container's first process is 1), so that no two processes share it.
var self = sync.OnceValue(func() string {
	host, _ := os.Hostname()
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s-%d-%s", hostToken(host), os.Getpid(), hex.EncodeToString(b))
})

// hostToken is host as one subject token: what is not a letter, a digit,
// - or _ (a domain's dots) becomes _.
func hostToken(host string) string {
	if host == "" {
		return "unknown"
	}
	b := []byte(host)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			b[i] = '_'
		}
	}
	return string(b)
}

// selfSuffix is the part of an instance Self adds to the host.
var selfSuffix = regexp.MustCompile(`-[0-9]+-[0-9a-f]{6}$`)

// Host is the host part of id's instance: all of it for a process older
// than Self, which answered with its host alone.
func (id Identity) Host() string { return selfSuffix.ReplaceAllString(id.Instance, "") }

// Name is how `herald reload` and the audit log name id: its connection as
// people say it ("butler garden" for butler.garden, "herald dev" for
// herald-dev), @ its instance.
func (id Identity) Name() string { return id.Kind() + "@" + id.Instance }

// Kind is id's connection as people say it.
func (id Identity) Kind() string {
	if b, ok := strings.CutPrefix(id.Conn, "butler."); ok {
		return "butler " + b
	} else if id.Conn == "herald-dev" {
		return "herald dev"
	}
	return id.Conn
}

// Butler is the butler id is, "" for a service (which decides for the
// fleet; a butler decides only for itself).
func (id Identity) Butler() string {
	if b, ok := strings.CutPrefix(id.Conn, "butler."); ok {
		return b
	}
	return ""
}

// Subject is where id answers the request with nonce.
func (id Identity) Subject(nonce string) string {
	return answerRoot + "." + nonce + "." + id.Conn + "." + id.Instance
}

// identityOf is who answered the request with nonce on subject, as the
// subject proves it: false if subject names no connection.
func identityOf(subject, nonce string) (Identity, bool) {
	rest, ok := strings.CutPrefix(subject, answerRoot+"."+nonce+".")
	conn, inst, ok2 := cutLast(rest, ".")
	if !ok || !ok2 || conn == "" || inst == "" {
		return Identity{}, false
	}
	// A service's connection name is one token, a butler's two.
	switch strings.Count(conn, ".") {
	case 0:
	case 1:
		if !strings.HasPrefix(conn, "butler.") || conn == "butler." {
			return Identity{}, false
		}
	default:
		return Identity{}, false
	}
	return Identity{Conn: conn, Instance: inst}, true
}

func cutLast(s, sep string) (before, after string, found bool) {
	if i := strings.LastIndex(s, sep); i >= 0 {
		return s[:i], s[i+len(sep):], true
	}
	return s, "", false
}

// valid: id's parts make one subject of the shape identityOf reads.
func (id Identity) valid() bool {
	got, ok := identityOf(id.Subject("n"), "n")
	return ok && got == id && isToken(id.Instance) && isToken(strings.ReplaceAll(id.Conn, ".", "_"))
}

// isToken: s is one NATS subject token, no wildcard.
func isToken(s string) bool {
	return s != "" && len(s) <= 128 && !strings.ContainsAny(s, ".*> \t\r\n\x00")
}

// Answer is one process's answer to a check or an apply.
type Answer struct {
	// Process names it: on the wire, the body's own word; once gathered,
	// the name its subject proves (Identity.Name), whatever the body says.
	Process string `json:"process"`
	// State is Applying in the beats a process sends while it applies a
	// file (an apply that asks for them); "" in its answer.
	State string `json:"state,omitempty"`
	// Beats, in an answer to a check: this process beats while it applies,
	// so its silence means it is gone. A process older than beats says
	// nothing of it, and is waited for as long as an apply may take.
	Beats bool `json:"beats,omitempty"`
	Result
	// Identity is who answered, as the subject proves it.
	Identity Identity `json:"-"`
	// Forged says why the answer counts for nothing, "" if it counts: its
	// body names another process than its subject, or is no reload
	// answer. A forged answer neither refuses nor passes a reload.
	Forged string `json:"-"`
}

// request is a check or an apply: the nonce names the answers' subjects.
type request struct {
	Nonce string `json:"nonce"`
	// Hash (an apply): the file every process checked.
	Hash string `json:"hash,omitempty"`
	// Beat (an apply): say Applying every BeatEvery until the answer.
	// Asked only by a herald that reads beats, which an older herald would
	// take for answers.
	Beat bool `json:"beat,omitempty"`
}

// Applying is Answer.State in a beat.
const Applying = "applying"

func newNonce() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}

// Serve answers `herald reload` as id, until the subscriptions are drained
// with the connection or stop is called.
func Serve(nc *nats.Conn, id Identity, w *Watcher) (stop func(), err error) {
	if !id.valid() {
		return nil, fmt.Errorf("answering herald reload as %q@%q: the connection name and the instance must be subject tokens", id.Conn, id.Instance)
	}
	answer := func(req request, a Answer) {
		a.Process = id.Name()
		b, _ := json.Marshal(a)
		if err := nc.Publish(id.Subject(req.Nonce), b); err != nil {
			w.log.Warn("answering herald reload", "err", err)
		}
	}
	// A request without a nonce comes from a herald older than this
	// process, which reads answers on a reply subject any user may answer
	// on: it is neither answered nor applied.
	decode := func(m *nats.Msg) (req request, ok bool) {
		if err := json.Unmarshal(m.Data, &req); err != nil || !isToken(req.Nonce) {
			w.log.Warn("herald reload: a request without a nonce is ignored; run a herald of this version", "subject", m.Subject)
			return req, false
		}
		return req, true
	}
	check, err := nc.Subscribe(CheckSubject, func(m *nats.Msg) {
		if req, ok := decode(m); ok {
			_, res := w.Check()
			answer(req, Answer{Beats: true, Result: res})
		}
	})
	if err != nil {
		return nil, err
	}
	apply, err := nc.Subscribe(ApplySubject, func(m *nats.Msg) {
		req, ok := decode(m)
		switch {
		case !ok:
		case req.Hash == "":
			answer(req, Answer{Result: Result{Error: "an apply with no hash"}})
		default:
			ctx, cancel := context.WithTimeout(context.Background(), ApplyTimeout)
			defer cancel()
			stopBeats := beat(req, func() { answer(req, Answer{State: Applying}) })
			res := w.Reload(ctx, "herald reload", req.Hash)
			stopBeats()
			answer(req, Answer{Result: res})
		}
	})
	if err != nil {
		_ = check.Unsubscribe()
		return nil, err
	}
	return func() { _ = check.Unsubscribe(); _ = apply.Unsubscribe() }, nil
}

// beat calls say at once and every BeatEvery until stop is called, if req
// asks for beats; stop returns once the last one is said, so the answer
// that follows comes after every beat.
func beat(req request, say func()) (stop func()) {
	if !req.Beat {
		return func() {}
	}
	say() // before the work, so that its silence means it is gone
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(BeatEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				say()
			}
		}
	}()
	return func() { close(done); <-stopped }
}

// BeatEvery is how often a process applying a file says so; Silence
// without a beat is how long `herald reload` waits before it takes the
// process as gone (killed, or cut off from NATS), and ComebackWait how
// long it then looks for one of its connection name in its place. Together
// they answer within 10 s of a process's death mid-apply.
const (
	BeatEvery    = time.Second
	Silence      = 3 * time.Second
	ComebackWait = 5 * time.Second
)

// ApplyTimeout bounds how long a process takes to apply a configuration
// (a service drains its work in flight first).
const ApplyTimeout = 30 * time.Second
