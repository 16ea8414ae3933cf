package approval_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/approval"
	"github.com/heraldhq/herald/pkg/bus/bustest"
)

func TestParse(t *testing.T) {
	tests := []struct {
		text, data, id, behavior string
		ok                       bool
	}{
		{"yes abcde", "", "abcde", "allow", true},
		{"  Y   ABCDE ", "", "abcde", "allow", true},
		{"no qwert", "", "qwert", "deny", true},
		{"n zzzzz", "", "zzzzz", "deny", true},
		{"yes abcdl", "", "", "", false}, // no l in ids
		{"yes abcd", "", "", "", false},
		{"yes please abcde", "", "", "", false},
		{"sure abcde", "", "", "", false},
		{"", "perm:allow:abcde", "abcde", "allow", true},
		{"", "perm:deny:abcde", "abcde", "deny", true},
		{"", "perm:maybe:abcde", "", "", false},
		// ASCII only: Unicode case folding would let ſ (U+017F) and K
		// (U+212A, Kelvin) through as letters of an id.
		{"yes ſſſſſ", "", "", "", false},
		{"yes abcdeK", "", "", "", false},
		{"Kes abcde", "", "", "", false},
		{"yes abcde", "", "", "", false},
	}
	for _, tt := range tests {
		id, behavior, ok := approval.Parse(tt.text, tt.data)
		if ok != tt.ok || id != tt.id || behavior != tt.behavior {
			t.Errorf("Parse(%q, %q) = %q %q %v", tt.text, tt.data, id, behavior, ok)
		}
	}
}

// newStore is an approval store on a bus of its own.
func newStore(t *testing.T) *approval.Store {
	t.Helper()
	_, js := bustest.RunServer(t).Connect()
	s, err := approval.Open(t.Context(), js)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// create stores each of rs.
func create(t *testing.T, s *approval.Store, rs ...approval.Request) {
	t.Helper()
	for _, r := range rs {
		if err := s.Create(t.Context(), r); err != nil {
			t.Fatal(err)
		}
	}
}

func TestSingleUseAndExpiry(t *testing.T) {
	s := newStore(t)
	now := time.Now()
	open := approval.Request{ID: "abcde", Butler: "health", Session: "s1", ToolName: "Bash", CreatedAt: now, ExpiresAt: now.Add(time.Minute)}
	if err := s.Create(t.Context(), open); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(t.Context(), open); !errors.Is(err, approval.ErrExists) {
		t.Fatalf("second create: %v", err)
	}
	if _, err := s.Answer(t.Context(), "health", "zzzzz", "allow", "1"); !errors.Is(err, approval.ErrUnknown) {
		t.Fatalf("unknown id: %v", err)
	}
	// Two approvers answer at once: exactly one wins.
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, by := range []string{"1", "2"} {
		wg.Add(1)
		go func() { defer wg.Done(); _, err := s.Answer(t.Context(), "health", "abcde", "allow", by); errs <- err }()
	}
	wg.Wait()
	close(errs)
	var won, used int
	for err := range errs {
		switch {
		case err == nil:
			won++
		case errors.Is(err, approval.ErrUsed):
			used++
		}
	}
	if won != 1 || used != 1 {
		t.Fatalf("won %d, refused as used %d", won, used)
	}
	expired := approval.Request{ID: "qwert", Butler: "health", CreatedAt: now.Add(-time.Hour), ExpiresAt: now.Add(-time.Minute)}
	create(t, s, expired)
	if _, err := s.Answer(t.Context(), "health", "qwert", "allow", "1"); !errors.Is(err, approval.ErrExpired) {
		t.Fatalf("expired: %v", err)
	}
}

// TestScopedAndSent: prompts are per butler (the same id may be open for two
// butlers, and answering one leaves the other), and a verdict's chat is found
// only where the prompt was sent.
func TestScopedAndSent(t *testing.T) {
	s := newStore(t)
	now := time.Now()
	for _, b := range []string{"health", "finance"} {
		create(t, s, approval.Request{ID: "abcde", Butler: b, CreatedAt: now, ExpiresAt: now.Add(time.Minute)})
	}
	if _, err := s.Answer(t.Context(), "finance", "abcde", "allow", "1"); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Get(t.Context(), "health", "abcde"); err != nil || r.Verdict != "" {
		t.Fatalf("health's prompt %+v %v: answering finance's must not touch it", r, err)
	}
	if err := s.MarkSent(t.Context(), "finance", "abcde", "tg_main", "12345"); err != nil {
		t.Fatal(err)
	}
	if b, err := s.SentTo(t.Context(), "tg_main", "12345", "abcde"); err != nil || b != "finance" {
		t.Fatalf("sent to 12345: %q %v", b, err)
	}
	for _, where := range [][2]string{{"tg_main", "999"}, {"tg_other", "12345"}} {
		if _, err := s.SentTo(t.Context(), where[0], where[1], "abcde"); !errors.Is(err, approval.ErrUnknown) {
			t.Fatalf("%v: %v, want unknown: it was never sent there", where, err)
		}
	}
	// Chats that are no key tokens (email addresses) work too.
	if err := s.MarkSent(t.Context(), "health", "qwert", "mail", "Alice@Example.com"); err != nil {
		t.Fatal(err)
	}
	if b, err := s.SentTo(t.Context(), "mail", "alice@example.com", "qwert"); err != nil || b != "health" {
		t.Fatalf("sent to alice: %q %v", b, err)
	}
}

// TestNeverExpires: a prompt without an expiry (approvals.expire_after: 0)
// can be answered whenever, and is never swept as expired; one whose time
// is over is closed once, and answering it then says it expired.
func TestNeverExpires(t *testing.T) {
	s := newStore(t)
	now := time.Now()
	create(t, s,
		approval.Request{ID: "abcde", Butler: "health", ToolName: "Bash", CreatedAt: now},
		approval.Request{ID: "fghij", Butler: "health", ToolName: "Bash", CreatedAt: now.Add(-time.Hour), ExpiresAt: now.Add(-time.Minute)},
	)
	expired, err := s.Expire(t.Context(), now.Add(48*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(expired) != 1 || expired[0].ID != "fghij" || expired[0].Verdict != approval.Expired {
		t.Fatalf("expired %+v, want only fghij", expired)
	}
	if again, err := s.Expire(t.Context(), now.Add(48*time.Hour)); err != nil || len(again) != 0 {
		t.Fatalf("a second sweep closed %+v (%v), want nothing", again, err)
	}
	if _, err := s.Answer(t.Context(), "health", "fghij", approval.Allow, "alice"); !errors.Is(err, approval.ErrExpired) {
		t.Errorf("answering the expired prompt: %v, want ErrExpired", err)
	}
	if r, err := s.Answer(t.Context(), "health", "abcde", approval.Allow, "alice"); err != nil || r.Verdict != approval.Allow {
		t.Errorf("answering the prompt that never expires: %+v %v", r, err)
	}
}

// TestQuorum: a prompt with quorum 2 needs two different approvers' allows;
// the same approver twice counts once; a deny ends it at once.
func TestQuorum(t *testing.T) {
	s := newStore(t)
	now := time.Now()
	for _, id := range []string{"abcde", "fghij"} {
		create(t, s, approval.Request{ID: id, Butler: "health", ToolName: "Bash", Quorum: 2, CreatedAt: now, ExpiresAt: now.Add(time.Minute)})
	}
	if r, err := s.Answer(t.Context(), "health", "abcde", approval.Allow, "alice"); !errors.Is(err, approval.ErrPending) || r.Verdict != "" || len(r.Allows) != 1 {
		t.Fatalf("first allow: %+v %v, want counted and pending", r, err)
	}
	if _, err := s.Answer(t.Context(), "health", "abcde", approval.Allow, "alice"); !errors.Is(err, approval.ErrRepeated) {
		t.Fatalf("alice again: %v, want ErrRepeated", err)
	}
	r, err := s.Answer(t.Context(), "health", "abcde", approval.Allow, "bob")
	if err != nil || r.Verdict != approval.Allow || r.AnsweredBy != "alice, bob" {
		t.Fatalf("second approver: %+v %v, want allowed by alice, bob", r, err)
	}
	if _, err := s.Answer(t.Context(), "health", "fghij", approval.Allow, "alice"); !errors.Is(err, approval.ErrPending) {
		t.Fatal(err)
	}
	if r, err := s.Answer(t.Context(), "health", "fghij", approval.Deny, "bob"); err != nil || r.Verdict != approval.Deny {
		t.Fatalf("a deny after one allow: %+v %v, want denied", r, err)
	}
}
