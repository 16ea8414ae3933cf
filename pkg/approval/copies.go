package approval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/bus"
)

// Verdicts of a prompt closed without an answer: nobody answered in time,
// or the MCP session that asked ended first.
const (
	Expired = "expired"
	Ended   = "ended"
)

// ExpiredNote is what a copy of a prompt or question closed unanswered
// shows.
const ExpiredNote = "⌛ expired: nobody answered in time"

// A prompt goes to every approver; each copy is a message Herald sent, which
// it edits once the prompt is closed (answered, expired), so no approver is
// left with live buttons. The switchboard records each copy in two steps:
// when it routes the prompt (Offer: where it goes), and when the messenger
// reports what it sent (Sent: the message's id).

// Copy is one approver's copy of a prompt.
type Copy struct {
	Butler string `json:"butler"`
	ID     string `json:"id"` // the prompt's
	// Channel ("type:id") and Chat are where the copy went.
	Channel string `json:"channel"`
	Chat    string `json:"chat"`
	// Headline is the prompt's first line ("🔐 health asks to run Bash"),
	// kept above the outcome when the copy is edited.
	Headline string `json:"headline"`
	// RequestID is the notify's that sent the copy; MessageID the id the
	// channel gave the message with the buttons ("" until sent).
	RequestID string `json:"request_id"`
	MessageID string `json:"message_id,omitempty"`
	// Subject is an edit's subject where an edit is a new mail ("" for a
	// prompt's: "Permission request <id>").
	Subject string `json:"subject,omitempty"`
}

func offerKey(requestID string) string { return "_offer." + requestID }

func copyKey(butler, id, requestID string) string {
	return "_copy." + butler + "." + id + "." + requestID
}

// Offer records that the notify requestID carries a copy of a prompt.
func (s *Store) Offer(ctx context.Context, c Copy) error {
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	_, err = s.kv.Put(ctx, offerKey(c.RequestID), b)
	return err
}

// Sent records the message ids the notify requestID was sent as, if it
// carried a prompt's copy (the buttons are on the last), and returns the
// copy; nil if it carried none.
func (s *Store) Sent(ctx context.Context, requestID string, messageIDs []string) (*Copy, error) {
	e, err := s.kv.Get(ctx, offerKey(requestID))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil // not a prompt
	}
	if err != nil {
		return nil, err
	}
	var c Copy
	if err := json.Unmarshal(e.Value(), &c); err != nil {
		return nil, fmt.Errorf("prompt copy of %s: %w", requestID, err)
	}
	for i := len(messageIDs) - 1; i >= 0 && c.MessageID == ""; i-- {
		c.MessageID = messageIDs[i]
	}
	if c.MessageID == "" {
		return nil, nil
	}
	b, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	if _, err := s.kv.Put(ctx, copyKey(c.Butler, c.ID, requestID), b); err != nil {
		return nil, err
	}
	return &c, nil
}

func closedKey(butler, id string) string { return "_closed." + butler + "." + id }

// Close records how butler's prompt id ended, as its copies are to show it.
// A copy whose message id is known only later (Sent after the prompt was
// answered) is edited from this. Close is written before the copies are
// listed, and Sent before this is read, so no copy is missed.
func (s *Store) Close(ctx context.Context, butler, id, outcome string) error {
	_, err := s.kv.Put(ctx, closedKey(butler, id), []byte(outcome))
	return err
}

// Outcome is how butler's prompt id ended, "" while it is open.
func (s *Store) Outcome(ctx context.Context, butler, id string) (string, error) {
	e, err := s.kv.Get(ctx, closedKey(butler, id))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return string(e.Value()), nil
}

// lister is the part of a bucket that lists keys (the switchboard's binding
// has it; a butler's DirectKV does not).
type lister interface {
	ListKeysFiltered(ctx context.Context, filters ...string) (jetstream.KeyLister, error)
}

// keys lists the keys matching filter.
func (s *Store) keys(ctx context.Context, filter string) ([]string, error) {
	l, ok := s.kv.(lister)
	if !ok {
		return nil, errors.New("this binding of the approvals bucket cannot list keys")
	}
	kl, err := l.ListKeysFiltered(ctx, filter)
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer func() { _ = kl.Stop() }()
	var out []string
	for k := range kl.Keys() {
		out = append(out, k)
	}
	return out, nil
}

// Copies are the sent copies of butler's prompt or question id.
func (s *Store) Copies(ctx context.Context, butler, id string) ([]Copy, error) {
	return listJSON[Copy](ctx, s, copyKey(butler, id, "*"))
}

// listJSON reads the records whose keys match filter; keys deleted while
// listed are left out.
func listJSON[T any](ctx context.Context, s *Store, filter string) ([]T, error) {
	keys, err := s.keys(ctx, filter)
	if err != nil {
		return nil, err
	}
	var out []T
	for _, k := range keys {
		e, err := s.kv.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		var v T
		if err := json.Unmarshal(e.Value(), &v); err != nil {
			return nil, fmt.Errorf("%s %s: %w", bus.BucketApprovals, k, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// Expire closes every open prompt whose time is over at now, once (of two
// switchboards sweeping, one closes each), and returns those it closed.
func (s *Store) Expire(ctx context.Context, now time.Time) ([]Request, error) {
	keys, err := s.keys(ctx, "*.*")
	if err != nil {
		return nil, err
	}
	var out []Request
	for _, k := range keys {
		// Prompts only: not the switchboard's records, not questions.
		if _, id, _ := strings.Cut(k, "."); strings.HasPrefix(k, "_") || !IDPattern.MatchString(id) {
			continue
		}
		e, err := s.kv.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return out, err
		}
		var r Request
		if err := json.Unmarshal(e.Value(), &r); err != nil {
			continue
		}
		if r.Unfinished && now.Sub(r.AnsweredAt) > FinishGrace {
			out = append(out, r) // closed by a switchboard killed before it finished
			continue
		}
		if r.Verdict != "" || !r.Expired(now) {
			continue
		}
		closed, err := s.close(ctx, k, Expired, now)
		if err != nil {
			return out, err
		}
		if closed != nil {
			out = append(out, *closed)
		}
	}
	return out, nil
}

// Finish records that the close of butler's prompt id is finished
// (Request.Unfinished): its audit record stored, its copies edited.
func (s *Store) Finish(ctx context.Context, butler, id string) error {
	return finish(ctx, s, Key(butler, id), func(r *Request) *bool { return &r.Unfinished })
}

// finish clears the flag unfinished points to in the record at key; a
// record gone meanwhile (its bucket's age) has nothing left to finish.
func finish[T any](ctx context.Context, s *Store, key string, unfinished func(*T) *bool) error {
	return bus.ChangeJSON(ctx, s.kv, key, func(v *T, found bool) (bool, error) {
		f := unfinished(v)
		was := *f
		*f = false
		return found && was, nil
	})
}

func endedKey(butler, id string) string { return butler + "." + id + ".ended" }

// EndedKeys is the subject-style filter of the keys by which butler marks
// its prompts' sessions ended, the only prompt keys it may write.
func EndedKeys(butler string) string { return butler + ".*.ended" }

// SessionEnded marks butler's prompt id as asked by a session that has
// ended: the butler writes it (its own key), and the switchboard closes the
// prompt (EndPrompts). Nobody can pass an answer on to a session that is gone.
func (s *Store) SessionEnded(ctx context.Context, butler, id string) error {
	_, err := s.kv.Put(ctx, endedKey(butler, id), []byte("ended"))
	return err
}

// EndPrompts closes the open prompts whose session ended (SessionEnded),
// once each, and returns those it closed.
func (s *Store) EndPrompts(ctx context.Context, now time.Time) ([]Request, error) {
	keys, err := s.keys(ctx, "*.*.ended")
	if err != nil {
		return nil, err
	}
	d, _ := s.kv.(interface {
		Delete(ctx context.Context, key string, opts ...jetstream.KVDeleteOpt) error
	})
	var out []Request
	for _, k := range keys {
		butler, rest, _ := strings.Cut(k, ".")
		id, _, _ := strings.Cut(rest, ".")
		r, err := s.close(ctx, Key(butler, id), Ended, now)
		if err != nil {
			return out, err
		}
		if r != nil {
			out = append(out, *r)
		}
		if d != nil {
			_ = d.Delete(ctx, k)
		}
	}
	return out, nil
}

// close sets the verdict of the open prompt at key, by compare-and-set, and
// returns it; nil if it is gone or closed already.
func (s *Store) close(ctx context.Context, key, verdict string, now time.Time) (*Request, error) {
	e, err := s.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var r Request
	if err := json.Unmarshal(e.Value(), &r); err != nil || r.Verdict != "" {
		return nil, nil
	}
	r.Verdict, r.AnsweredAt, r.Unfinished = verdict, now.UTC(), true
	b, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	if _, err := s.kv.Update(ctx, key, b, e.Revision()); err != nil {
		return nil, nil // answered or closed by another meanwhile
	}
	return &r, nil
}

// Open counts the prompts and the questions still waiting for an answer,
// for the switchboard's status.
func (s *Store) Open(ctx context.Context) (prompts, questions int, err error) {
	keys, err := s.keys(ctx, "*.*")
	if err != nil {
		return 0, 0, err
	}
	qkeys, err := s.keys(ctx, "*.q.*")
	if err != nil {
		return 0, 0, err
	}
	for _, k := range append(keys, qkeys...) {
		question := strings.Contains(k, ".q.")
		if _, id, _ := strings.Cut(k, "."); !question && (strings.HasPrefix(k, "_") || !IDPattern.MatchString(id)) {
			continue
		}
		e, err := s.kv.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return prompts, questions, err
		}
		if question {
			var q Question
			if json.Unmarshal(e.Value(), &q) == nil && q.Answer == "" && q.Closed == "" {
				questions++
			}
			continue
		}
		var r Request
		if json.Unmarshal(e.Value(), &r) == nil && r.Verdict == "" {
			prompts++
		}
	}
	return prompts, questions, nil
}
