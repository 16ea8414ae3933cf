// Package approval holds the open permission prompts of the permission relay
// (architecture.md §5) in the herald_approvals bucket. A butler opens one when its
// model asks to run a tool; the switchboard closes it when an approver
// answers. Each prompt is single use and expires.
//
// Keys are scoped: "<butler>.<id>" for a prompt, so NATS permissions let a
// butler write only its own and read none; "_sent.<integration>.<chat>.<id>"
// records, when the switchboard passes a prompt on, which butler's prompt was
// sent to which chat (no butler name starts with "_", so no butler can reach
// them). A verdict counts only in a chat its prompt was sent to, so a butler
// cannot phish an approver into answering another's prompt.
package approval

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/envelope"
)

// DefaultTTL is how long a prompt can be answered.
const DefaultTTL = 10 * time.Minute

// Behaviors of a verdict.
const (
	Allow = "allow"
	Deny  = "deny"
	// Session is the button "Allow for this session": allow, and grant
	// the session the tool for approvals.grant_ttl (grants.go).
	Session = "session"
)

// The ways a prompt fails to be answered. Each is audited by the caller.
var (
	// ErrUnknown: no open prompt has that id.
	ErrUnknown = errors.New("unknown permission request id")
	// ErrExpired: the prompt's time is over.
	ErrExpired = errors.New("permission request expired")
	// ErrUsed: the prompt was already answered.
	ErrUsed = errors.New("permission request already answered")
	// ErrExists: a prompt with that id is already open.
	ErrExists = errors.New("permission request id already in use")
	// ErrEnded: the session that asked ended before anyone answered.
	ErrEnded = errors.New("the session that asked has ended")
	// ErrPending: an allow was counted, and the prompt waits for more
	// approvers (its quorum).
	ErrPending = errors.New("permission request waits for more approvers")
	// ErrRepeated: this approver has allowed it already; another must.
	ErrRepeated = errors.New("permission request already allowed by this approver")
)

// IDPattern is the shape of request ids clients generate: five letters, no "l".
var IDPattern = regexp.MustCompile(`^[a-km-z]{5}$`)

// VerdictPattern matches a typed verdict, "yes abcde" or "n abcde", in ASCII
// only: (?i) would also fold ſ and K into the id, which then is no key.
var VerdictPattern = regexp.MustCompile(`^[ \t\r\n]*([yY]|[yY][eE][sS]|[nN]|[nN][oO])[ \t]+([a-km-zA-KM-Z]{5})[ \t\r\n]*$`)

// CallbackPattern matches the data of a verdict button, "perm:allow:abcde"
// (allow, deny, or session for "Allow for this session").
var CallbackPattern = regexp.MustCompile(`^perm:(allow|deny|session):([a-km-z]{5})$`)

// Buttons are a prompt's buttons: Allow, Deny, and Allow for this session,
// which a prompt that needs a quorum does not offer (a grant is one
// approver's word).
func Buttons(id string, quorum int) []envelope.Action {
	b := []envelope.Action{{Label: "Allow", Data: "perm:allow:" + id}, {Label: "Deny", Data: "perm:deny:" + id}}
	if quorum <= 1 {
		b = append(b, envelope.Action{Label: "Allow for this session", Data: "perm:session:" + id})
	}
	return b
}

// Parse reads a verdict from a message's text or a button's callback data.
func Parse(text, callbackData string) (id, behavior string, ok bool) {
	if m := CallbackPattern.FindStringSubmatch(callbackData); m != nil {
		return m[2], m[1], true
	}
	if m := VerdictPattern.FindStringSubmatch(text); m != nil {
		behavior = Deny
		if m[1][0] == 'y' || m[1][0] == 'Y' {
			behavior = Allow
		}
		return toLower(m[2]), behavior, true
	}
	return "", "", false
}

func toLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// Request is one open prompt.
type Request struct {
	ID           string    `json:"id"`
	Butler       string    `json:"butler"`
	Session      string    `json:"session"` // the MCP session that asked
	ToolName     string    `json:"tool_name"`
	Description  string    `json:"description,omitempty"`
	InputPreview string    `json:"input_preview,omitempty"`
	CreatedAt    time.Time `json:"created_at"`
	ExpiresAt    time.Time `json:"expires_at,omitzero"`
	// Quorum is how many distinct approvers must allow it (butlers[].quorum;
	// 0 or 1: one); Allows are those who have, while it waits for more.
	Quorum int      `json:"quorum,omitempty"`
	Allows []string `json:"allows,omitempty"`
	// Verdict is empty while open, then allow, deny or expired.
	Verdict    string    `json:"verdict,omitempty"`
	AnsweredBy string    `json:"answered_by,omitempty"`
	AnsweredAt time.Time `json:"answered_at,omitzero"`
	// Unfinished says the switchboard closed it without an answer (expired,
	// its session ended) and has not yet stored the close's audit record
	// and edited its copies: a switchboard killed in between leaves it so,
	// and the next sweep after FinishGrace finishes it (Expire).
	Unfinished bool `json:"unfinished,omitempty"`
}

// FinishGrace is how long a close may stay unfinished before a sweep takes
// it as cut short by a kill and finishes it again: longer than a live
// switchboard takes (bus.ConfirmWait and the copies' edits).
const FinishGrace = 20 * time.Second

// Expired reports whether the prompt's time is over at now; a prompt
// without ExpiresAt (approvals.expire_after 0) never expires.
func (r *Request) Expired(now time.Time) bool {
	return !r.ExpiresAt.IsZero() && now.After(r.ExpiresAt)
}

// Store reads and writes prompts.
type Store struct {
	kv  bus.KV
	now func() time.Time
}

// New is a store over kv: the bucket, or a butler's bus.DirectKV of its own
// keys (a butler only creates prompts).
func New(kv bus.KV) *Store { return &Store{kv: kv, now: time.Now} }

// Open binds to the bucket (bus.EnsureTopology creates it).
func Open(ctx context.Context, js jetstream.JetStream) (*Store, error) {
	kv, err := js.KeyValue(ctx, bus.BucketApprovals)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", bus.BucketApprovals, err)
	}
	return &Store{kv: kv, now: time.Now}, nil
}

// Key is the key of butler's prompt id.
func Key(butler, id string) string { return butler + "." + id }

// sentKey is the key recording that a prompt id went to chat on integration.
// The chat is encoded, since chat ids (email addresses, negative numbers)
// are not all key tokens.
func sentKey(integration, chat, id string) string {
	return "_sent." + integration + "." + encodeChat(chat) + "." + id
}

// encodeChat is a chat id as a key token: chat ids (email addresses,
// negative numbers) are not all key tokens.
func encodeChat(chat string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strings.ToLower(chat)))
}

// Create opens a prompt of r.Butler; its id must be new for that butler.
func (s *Store) Create(ctx context.Context, r Request) error {
	if !IDPattern.MatchString(r.ID) {
		return fmt.Errorf("permission request id %q must be five letters a-z without l", r.ID)
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if _, err := s.kv.Create(ctx, Key(r.Butler, r.ID), b); err != nil {
		if errors.Is(err, jetstream.ErrKeyExists) {
			return ErrExists
		}
		return err
	}
	return nil
}

// MarkSent records that butler's prompt id was sent to chat on integration,
// so that a verdict from there counts.
func (s *Store) MarkSent(ctx context.Context, butler, id, integration, chat string) error {
	_, err := s.kv.Put(ctx, sentKey(integration, chat, id), []byte(butler))
	return err
}

// SentTo returns the butler whose prompt id was sent to chat on
// integration; ErrUnknown if none was.
func (s *Store) SentTo(ctx context.Context, integration, chat, id string) (string, error) {
	e, err := s.entry(ctx, sentKey(integration, chat, id))
	if err != nil {
		return "", err
	}
	return string(e.Value()), nil
}

// Answer closes butler's prompt id with behavior, once: a second answer, an
// expired prompt or an unknown id changes nothing and says why. A prompt
// with a quorum counts each approver's allow (ErrPending until there are
// enough, ErrRepeated for the same approver again) and closes on the last;
// a deny closes it at once.
func (s *Store) Answer(ctx context.Context, butler, id, behavior, by string) (*Request, error) {
	return s.answer(ctx, butler, id, behavior, by, 1)
}

func (s *Store) answer(ctx context.Context, butler, id, behavior, by string, tries int) (*Request, error) {
	e, err := s.entry(ctx, Key(butler, id))
	if err != nil {
		return nil, err
	}
	var r Request
	if err := json.Unmarshal(e.Value(), &r); err != nil {
		return nil, fmt.Errorf("approval %s: %w", id, err)
	}
	switch {
	case r.Verdict == Expired:
		return &r, ErrExpired
	case r.Verdict == Ended:
		return &r, ErrEnded
	case r.Verdict != "":
		return &r, ErrUsed
	case r.Expired(s.now()):
		return &r, ErrExpired
	}
	var pending error
	switch {
	case behavior == Allow && r.Quorum > 1 && slices.Contains(r.Allows, by):
		return &r, ErrRepeated
	case behavior == Allow && r.Quorum > 1 && len(r.Allows)+1 < r.Quorum:
		// Counted; the prompt stays open for the others.
		r.Allows, pending = append(r.Allows, by), ErrPending
	case behavior == Allow && r.Quorum > 1:
		r.Allows = append(r.Allows, by)
		r.Verdict, r.AnsweredBy, r.AnsweredAt = behavior, strings.Join(r.Allows, ", "), s.now().UTC()
	default:
		// A deny ends it, however many allowed before.
		r.Verdict, r.AnsweredBy, r.AnsweredAt = behavior, by, s.now().UTC()
	}
	b, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	// Compare-and-set: of two answers racing, only one wins; the other is
	// tried again on what the winner left (an allow counted, or closed).
	if _, err := s.kv.Update(ctx, Key(butler, id), b, e.Revision()); err != nil {
		if r.Quorum > 1 && tries < maxTries {
			return s.answer(ctx, butler, id, behavior, by, tries+1)
		}
		return &r, ErrUsed
	}
	return &r, pending
}

// maxTries bounds how often an allow toward a quorum is tried again after
// another answer changed the prompt under it.
const maxTries = 5

// Get returns butler's prompt id.
func (s *Store) Get(ctx context.Context, butler, id string) (*Request, error) {
	e, err := s.entry(ctx, Key(butler, id))
	if err != nil {
		return nil, err
	}
	var r Request
	return &r, json.Unmarshal(e.Value(), &r)
}

// entry reads key; ErrUnknown if there is none.
func (s *Store) entry(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	e, err := s.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, ErrUnknown
	}
	return e, err
}
