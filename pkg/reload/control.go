package reload

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
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
// subject, so there is no inbox any user may answer on.
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
	// messengers): Instance of their host.
	Instance string
}

// Instance is host as one subject token: what is not a letter, a digit, -
// or _ (a domain's dots) becomes _.
func Instance(host string) string {
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

// Name is how `herald reload` and the audit log name id: its connection as
// people say it ("butler garden" for butler.garden, "herald dev" for
// herald-dev), @ its instance.
func (id Identity) Name() string {
	kind := id.Conn
	if b, ok := strings.CutPrefix(kind, "butler."); ok {
		kind = "butler " + b
	} else if kind == "herald-dev" {
		kind = "herald dev"
	}
	return kind + "@" + id.Instance
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
}

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
	answer := func(req request, res Result) {
		b, _ := json.Marshal(Answer{Process: id.Name(), Result: res})
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
			answer(req, res)
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
			answer(req, Result{Error: "an apply with no hash"})
		default:
			ctx, cancel := context.WithTimeout(context.Background(), ApplyTimeout)
			defer cancel()
			answer(req, w.Reload(ctx, "herald reload", req.Hash))
		}
	})
	if err != nil {
		_ = check.Unsubscribe()
		return nil, err
	}
	return func() { _ = check.Unsubscribe(); _ = apply.Unsubscribe() }, nil
}

// ApplyTimeout bounds how long a process takes to apply a configuration
// (a service drains its work in flight first).
const ApplyTimeout = 30 * time.Second
