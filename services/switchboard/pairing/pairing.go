// Package pairing lets a stranger in on an integration whose dm_policy is
// pairing: their first direct message gets a short code, and the operator
// who runs `herald pair approve CODE` pairs them. Approval is never possible
// from a chat.
//
//   - Store, Open: the codes and the paired senders, in herald_pairing.
//   - Store.Request, Approve, Revoke, IsPaired: a code for a
//     stranger (with how their channel names them), the operator's answer,
//     and the gate's question; Pending, Paired: the lists.
//   - MaxNewCodes, PairingWindow, PairingTTL: limits that keep a few strangers
//     from shutting pairing to others for long; ErrPending, ErrFull, ...
//
// What the limits guarantee is in docs/security.md, "The doors and their
// locks", and docs/inbound.md, "The switchboard's gates, in order".
package pairing

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/bus"
)

// Store holds the pairing codes and the paired senders.
type Store struct {
	kv  jetstream.KeyValue
	now func() time.Time
}

// Pairing limits.
const (
	// MaxNewCodes is how many codes one integration hands out in any
	// PairingWindow: enough for a household, too few for strangers to flood
	// the operator (at most 18 pending at once).
	MaxNewCodes = 3
	// PairingWindow is how long a new code holds one of its integration's
	// MaxNewCodes places; short, so that a few strangers cannot keep others
	// from a code for long.
	PairingWindow = 10 * time.Minute
	// PairingTTL is how long a code can be approved, and how long its
	// stranger waits for another.
	PairingTTL = time.Hour
	// codeAlphabet has no 0/O or 1/I/L, so a code read aloud is typed right.
	codeAlphabet = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
	codeLength   = 6
)

// Errors of pairing.
var (
	// ErrPending: the sender already holds a pending code.
	ErrPending = errors.New("a pairing code is already pending for this sender")
	// ErrFull: the integration handed out MaxNewCodes codes in the
	// last PairingWindow.
	ErrFull = errors.New("too many new pairing codes")
	// ErrCodeUnknown: no pending code is spelled that way.
	ErrCodeUnknown = errors.New("no such pairing code")
	// ErrCodeExpired: the code's hour is over.
	ErrCodeExpired = errors.New("pairing code expired")
	// ErrNotPaired: revoke found no such paired sender.
	ErrNotPaired = errors.New("sender is not paired")
)

// Code is one pending code.
type Code struct {
	Code        string `json:"code"`
	Integration string `json:"integration"`
	Sender      string `json:"sender"`
	// Name is how the channel names the sender (its meta user: a Telegram
	// username, else a first name), for the operator who decides; ""
	// when it does not, as in records written before it was kept.
	Name    string    `json:"name,omitempty"`
	ChatID  string    `json:"chat_id,omitempty"`
	Created time.Time `json:"created"`
	Expires time.Time `json:"expires"`
	// NativeID is the message that asked for the code, so a redelivery of
	// that message sends the same code again instead of being refused.
	NativeID string `json:"native_id,omitempty"`
}

// Sender is a sender let in by the operator.
type Sender struct {
	Integration string `json:"integration"`
	Sender      string `json:"sender"`
	// Name is the Name of the code they were paired by.
	Name   string    `json:"name,omitempty"`
	ChatID string    `json:"chat_id,omitempty"`
	Code   string    `json:"code"`
	Paired time.Time `json:"paired"`
}

// Open binds to the herald_pairing bucket (bus.EnsureTopology creates it).
func Open(ctx context.Context, js jetstream.JetStream) (*Store, error) {
	kv, err := js.KeyValue(ctx, bus.BucketPairing)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", bus.BucketPairing, err)
	}
	return &Store{kv: kv, now: time.Now}, nil
}

// The keys of herald_pairing: an integration's pending codes in one list,
// updated compare-and-set so that MaxNewCodes holds across replicas; each
// pending code on its own, for approval by code; each paired sender (its id
// escaped into one key token).
func pendingKey(integration string) string { return "pending." + integration }
func codeKey(code string) string           { return "code." + code }
func pairedKey(integration, sender string) string {
	return "paired." + integration + "." + bus.KeyToken(sender)
}

// NormalizeCode is how a typed code is compared: case and surrounding spaces
// do not matter.
func NormalizeCode(code string) string { return strings.ToUpper(strings.TrimSpace(code)) }

// IsPaired reports whether sender was paired on integration.
func (p *Store) IsPaired(ctx context.Context, integration, sender string) (bool, error) {
	_, err := p.kv.Get(ctx, pairedKey(integration, sender))
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}

// Request gives sender a new pairing code on integration; name is what the
// channel calls them (the inbound message's meta user, "" if none), kept
// with the code and the pairing so that herald pair list shows who asked.
// A sender with a pending code gets ErrPending and that code, unless the
// same message (nativeID) asks again, a redelivery after a crash, which
// gets the code back to send. An integration that handed out MaxNewCodes
// codes in the last PairingWindow gets ErrFull.
func (p *Store) Request(ctx context.Context, integration, sender, name, chatID, nativeID string) (*Code, error) {
	now := p.now().UTC()
	c := &Code{Integration: integration, Sender: sender, Name: name, ChatID: chatID, Created: now, Expires: now.Add(PairingTTL), NativeID: nativeID}
	for {
		list, rev, err := p.pending(ctx, integration)
		if err != nil {
			p.release(c.Code)
			return nil, err
		}
		var expired []string
		live := list[:0]
		for _, pc := range list {
			if now.After(pc.Expires) {
				expired = append(expired, pc.Code)
				continue
			}
			live = append(live, pc)
		}
		if i := slices.IndexFunc(live, func(pc Code) bool { return pc.Sender == sender }); i >= 0 {
			p.release(c.Code)
			held := live[i]
			if nativeID == "" || held.NativeID != nativeID {
				return &held, ErrPending
			}
			// The same message again: make sure the code can be approved
			// (the first try may have stopped before writing it), and let
			// the caller send it again.
			b, err := json.Marshal(held)
			if err != nil {
				return nil, err
			}
			if _, err := p.kv.Put(ctx, codeKey(held.Code), b); err != nil {
				return nil, err
			}
			return &held, nil
		}
		recent := 0
		for _, pc := range live {
			if now.Before(pc.Created.Add(PairingWindow)) {
				recent++
			}
		}
		if recent >= MaxNewCodes {
			p.release(c.Code)
			return nil, ErrFull
		}
		if c.Code == "" {
			// Reserve a code nobody holds before listing it.
			if c.Code, err = p.reserve(ctx, c); err != nil {
				return nil, err
			}
		}
		b, err := json.Marshal(append(live, *c))
		if err != nil {
			return nil, err
		}
		err = p.writePending(ctx, integration, b, rev)
		if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			continue // another replica changed the list; read it again
		}
		if err != nil {
			p.release(c.Code)
			return nil, err
		}
		for _, code := range expired {
			p.release(code)
		}
		return c, nil
	}
}

// reserve creates code.<CODE> for a fresh random code.
func (p *Store) reserve(ctx context.Context, c *Code) (string, error) {
	for range 10 {
		code := newCode()
		held := *c
		held.Code = code
		b, err := json.Marshal(held)
		if err != nil {
			return "", err
		}
		_, err = p.kv.Create(ctx, codeKey(code), b)
		switch {
		case err == nil:
			return code, nil
		case !errors.Is(err, jetstream.ErrKeyExists):
			return "", err
		}
	}
	return "", fmt.Errorf("no free pairing code after 10 tries")
}

// release forgets a code; best effort, a leftover code expires unused.
func (p *Store) release(code string) {
	if code == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = p.kv.Purge(ctx, codeKey(code))
}

func newCode() string {
	b := make([]byte, 0, codeLength)
	var r [16]byte
	for len(b) < codeLength {
		_, _ = rand.Read(r[:])
		for _, c := range r {
			// Only bytes below the largest multiple of the alphabet's size,
			// so every symbol is equally likely.
			if int(c) < 256/len(codeAlphabet)*len(codeAlphabet) && len(b) < codeLength {
				b = append(b, codeAlphabet[int(c)%len(codeAlphabet)])
			}
		}
	}
	return string(b)
}

// pending reads an integration's pending list and its revision (0: none yet).
func (p *Store) pending(ctx context.Context, integration string) ([]Code, uint64, error) {
	e, err := p.kv.Get(ctx, pendingKey(integration))
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return nil, 0, nil
	case err != nil:
		return nil, 0, err
	}
	var list []Code
	if err := json.Unmarshal(e.Value(), &list); err != nil {
		return nil, 0, fmt.Errorf("%s: %w", pendingKey(integration), err)
	}
	return list, e.Revision(), nil
}

func (p *Store) writePending(ctx context.Context, integration string, b []byte, rev uint64) error {
	var err error
	if rev == 0 {
		_, err = p.kv.Create(ctx, pendingKey(integration), b)
	} else {
		_, err = p.kv.Update(ctx, pendingKey(integration), b, rev)
	}
	return err
}

// Pending lists every code that can still be approved, soonest to expire first.
func (p *Store) Pending(ctx context.Context) ([]Code, error) {
	keys, err := p.keys(ctx, "pending.>")
	if err != nil {
		return nil, err
	}
	now := p.now()
	var out []Code
	for _, k := range keys {
		list, _, err := p.pending(ctx, strings.TrimPrefix(k, "pending."))
		if err != nil {
			return nil, err
		}
		for _, pc := range list {
			if !now.After(pc.Expires) {
				out = append(out, pc)
			}
		}
	}
	slices.SortFunc(out, func(a, b Code) int { return a.Expires.Compare(b.Expires) })
	return out, nil
}

// Paired lists every paired sender.
func (p *Store) Paired(ctx context.Context) ([]Sender, error) {
	keys, err := p.keys(ctx, "paired.>")
	if err != nil {
		return nil, err
	}
	var out []Sender
	for _, k := range keys {
		e, err := p.kv.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // revoked meanwhile
		}
		if err != nil {
			return nil, err
		}
		var ps Sender
		if err := json.Unmarshal(e.Value(), &ps); err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		out = append(out, ps)
	}
	slices.SortFunc(out, func(a, b Sender) int {
		return strings.Compare(a.Integration+"\x00"+a.Sender, b.Integration+"\x00"+b.Sender)
	})
	return out, nil
}

func (p *Store) keys(ctx context.Context, filter string) ([]string, error) {
	kl, err := p.kv.ListKeysFiltered(ctx, filter)
	if err != nil {
		return nil, err
	}
	defer func() { _ = kl.Stop() }()
	var keys []string
	for k := range kl.Keys() {
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	return keys, ctx.Err()
}

// Approve pairs the sender who was given code (any case), and retires the
// code. An unknown or expired code changes nothing.
func (p *Store) Approve(ctx context.Context, code string) (*Sender, error) {
	code = NormalizeCode(code)
	if len(code) != codeLength || strings.Trim(code, codeAlphabet) != "" {
		return nil, fmt.Errorf("%w %q: a code is %d letters and digits, as `herald pair list` shows", ErrCodeUnknown, code, codeLength)
	}
	e, err := p.kv.Get(ctx, codeKey(code))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, fmt.Errorf("%w %q; `herald pair list` shows the pending ones", ErrCodeUnknown, code)
	}
	if err != nil {
		return nil, err
	}
	var c Code
	if err := json.Unmarshal(e.Value(), &c); err != nil {
		return nil, fmt.Errorf("%s: %w", codeKey(code), err)
	}
	if p.now().After(c.Expires) {
		if err := p.unlist(ctx, c.Integration, code); err != nil {
			return nil, err
		}
		p.release(code)
		return nil, fmt.Errorf("%w: %s expired at %s; the sender gets a new code by writing again", ErrCodeExpired, code, c.Expires.Local().Format(time.DateTime))
	}
	ps := Sender{Integration: c.Integration, Sender: c.Sender, Name: c.Name, ChatID: c.ChatID, Code: code, Paired: p.now().UTC()}
	b, err := json.Marshal(ps)
	if err != nil {
		return nil, err
	}
	if _, err := p.kv.Put(ctx, pairedKey(c.Integration, c.Sender), b); err != nil {
		return nil, err
	}
	if err := p.unlist(ctx, c.Integration, code); err != nil {
		return nil, err
	}
	if err := p.kv.Purge(ctx, codeKey(code)); err != nil {
		return nil, err
	}
	return &ps, nil
}

// unlist removes code from its integration's pending list.
func (p *Store) unlist(ctx context.Context, integration, code string) error {
	for {
		list, rev, err := p.pending(ctx, integration)
		if err != nil || rev == 0 {
			return err
		}
		kept := slices.DeleteFunc(list, func(pc Code) bool { return pc.Code == code })
		b, err := json.Marshal(kept)
		if err != nil {
			return err
		}
		_, err = p.kv.Update(ctx, pendingKey(integration), b, rev)
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) {
			continue
		}
		return err
	}
}

// Revoke unpairs sender on integration; their next message is treated as a
// stranger's again.
func (p *Store) Revoke(ctx context.Context, integration, sender string) error {
	key := pairedKey(integration, sender)
	if _, err := p.kv.Get(ctx, key); errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("%w: %q on %s; `herald pair list` shows who is", ErrNotPaired, sender, integration)
	} else if err != nil {
		return err
	}
	return p.kv.Purge(ctx, key)
}
