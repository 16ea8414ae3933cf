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
	}
	for _, tt := range tests {
		id, behavior, ok := approval.Parse(tt.text, tt.data)
		if ok != tt.ok || id != tt.id || behavior != tt.behavior {
			t.Errorf("Parse(%q, %q) = %q %q %v", tt.text, tt.data, id, behavior, ok)
		}
	}
}

func TestSingleUseAndExpiry(t *testing.T) {
	srv := bustest.RunServer(t)
	_, js := srv.Connect()
	s, err := approval.Open(t.Context(), js)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	open := approval.Request{ID: "abcde", Butler: "health", Session: "s1", ToolName: "Bash", CreatedAt: now, ExpiresAt: now.Add(time.Minute)}
	if err := s.Create(t.Context(), open); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(t.Context(), open); !errors.Is(err, approval.ErrExists) {
		t.Fatalf("second create: %v", err)
	}
	if _, err := s.Answer(t.Context(), "zzzzz", "allow", "1"); !errors.Is(err, approval.ErrUnknown) {
		t.Fatalf("unknown id: %v", err)
	}
	// Two approvers answer at once: exactly one wins.
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, by := range []string{"1", "2"} {
		wg.Add(1)
		go func() { defer wg.Done(); _, err := s.Answer(t.Context(), "abcde", "allow", by); errs <- err }()
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
	if err := s.Create(t.Context(), expired); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Answer(t.Context(), "qwert", "allow", "1"); !errors.Is(err, approval.ErrExpired) {
		t.Fatalf("expired: %v", err)
	}
}
