package token_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/bus/bustest"
	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/pkg/token"
)

// tokens is the operator's store and, for verifiers, the bucket as a butler
// reads it (its own keys' subjects only), on one clock.
type tokens struct {
	*token.Store
	js    jetstream.JetStream
	clock *testkit.Clock
}

func openStore(t *testing.T) (*tokens, *testkit.Clock) {
	t.Helper()
	_, js := bustest.RunServer(t).Connect()
	s, err := token.Open(t.Context(), js)
	if err != nil {
		t.Fatal(err)
	}
	c := testkit.NewClock(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	token.SetClock(s, c.Now)
	return &tokens{Store: s, js: js, clock: c}, c
}

func (s *tokens) verifier(butler string, cacheFor time.Duration) *token.Verifier {
	v := token.NewVerifier(bus.NewDirectKV(s.js, bus.BucketTokens), butler, cacheFor)
	token.SetVerifierClock(v, s.clock.Now)
	return v
}

func TestMintVerifyRevoke(t *testing.T) {
	s, _ := openStore(t)
	ctx := t.Context()
	tok, rec, err := s.Mint(ctx, "health", 0)
	if err != nil {
		t.Fatal(err)
	}
	if id, ok := token.ParseID(tok); !ok || id != rec.ID || rec.Butler != "health" || !rec.Expires.IsZero() {
		t.Fatalf("token %q parses to %q, record %+v", tok, id, rec)
	}
	if strings.Contains(rec.SHA256, tok) || rec.SHA256 != token.Hash(tok) {
		t.Fatalf("record keeps %q, want the token's hash", rec.SHA256)
	}
	v := s.verifier("health", 0)
	if got, err := v.Verify(ctx, tok); err != nil || got.ID != rec.ID {
		t.Fatalf("Verify = %+v, %v", got, err)
	}

	// Only the butler it was minted for takes it, and only all of it.
	other := s.verifier("finance", 0)
	for name, tc := range map[string]struct {
		v   *token.Verifier
		tok string
	}{
		"another butler":   {other, tok},
		"secret changed":   {v, tok[:len(tok)-1] + flip(tok[len(tok)-1])},
		"id changed":       {v, tok[:4] + flipHex(tok[4]) + tok[5:]},
		"truncated":        {v, tok[:len(tok)-2]},
		"not a token":      {v, "hunter2"},
		"static, unminted": {v, token.NewStatic()},
		"empty":            {v, ""},
	} {
		if _, err := tc.v.Verify(ctx, tc.tok); !errors.Is(err, token.ErrUnknown) {
			t.Errorf("%s: Verify = %v, want ErrUnknown", name, err)
		}
	}

	got, err := s.Revoke(ctx, rec.ID)
	if err != nil || got.Butler != "health" {
		t.Fatalf("Revoke = %+v, %v", got, err)
	}
	if _, err := v.Verify(ctx, tok); !errors.Is(err, token.ErrUnknown) {
		t.Fatalf("a revoked token: Verify = %v, want ErrUnknown", err)
	}
	if _, err := s.Revoke(ctx, rec.ID); !errors.Is(err, token.ErrUnknown) {
		t.Fatalf("revoking twice: %v, want ErrUnknown", err)
	}
	if _, err := s.Revoke(ctx, "health."+rec.ID); !errors.Is(err, token.ErrInvalid) {
		t.Fatalf("revoking a malformed id: %v, want ErrInvalid", err)
	}
}

func flip(c byte) string {
	if c == 'A' {
		return "B"
	}
	return "A"
}

func flipHex(c byte) string {
	if c == '0' {
		return "1"
	}
	return "0"
}

func TestExpiredTokenRefused(t *testing.T) {
	s, c := openStore(t)
	tok, rec, err := s.Mint(t.Context(), "health", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if want := c.Now().Add(time.Hour); !rec.Expires.Equal(want) {
		t.Fatalf("expires %v, want %v", rec.Expires, want)
	}
	v := s.verifier("health", time.Minute)
	c.Advance(59 * time.Minute)
	if _, err := v.Verify(t.Context(), tok); err != nil {
		t.Fatalf("before expiry: %v", err)
	}
	c.Advance(time.Minute)
	if _, err := v.Verify(t.Context(), tok); !errors.Is(err, token.ErrExpired) {
		t.Fatalf("at expiry: %v, want ErrExpired", err)
	}
}

// TestRevokeWithinCacheTime: a butler keeps a lookup for its cache time, no
// longer; a revoked token stops working once that has passed.
func TestRevokeWithinCacheTime(t *testing.T) {
	s, c := openStore(t)
	ctx := t.Context()
	tok, rec, err := s.Mint(ctx, "health", 0)
	if err != nil {
		t.Fatal(err)
	}
	v := s.verifier("health", 3*time.Second)
	if _, err := v.Verify(ctx, tok); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Revoke(ctx, rec.ID); err != nil {
		t.Fatal(err)
	}
	c.Advance(2 * time.Second)
	if _, err := v.Verify(ctx, tok); err != nil {
		t.Fatalf("within the cache time the lookup is kept: %v", err)
	}
	c.Advance(time.Second)
	if _, err := v.Verify(ctx, tok); !errors.Is(err, token.ErrUnknown) {
		t.Fatalf("after the cache time: %v, want ErrUnknown", err)
	}
}

func TestList(t *testing.T) {
	s, c := openStore(t)
	ctx := t.Context()
	var ids []string
	for _, b := range []string{"health", "finance", "health"} {
		_, rec, err := s.Mint(ctx, b, 0)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, rec.ID)
		c.Advance(time.Second)
	}
	all, err := s.List(ctx, "")
	if err != nil || len(all) != 3 || all[0].ID != ids[0] || all[2].ID != ids[2] {
		t.Fatalf("List all = %+v, %v", all, err)
	}
	health, err := s.List(ctx, "health")
	if err != nil || len(health) != 2 || health[0].ID != ids[0] || health[1].ID != ids[2] {
		t.Fatalf("List health = %+v, %v", health, err)
	}
}

func TestMintRefusesBadInput(t *testing.T) {
	s, _ := openStore(t)
	for _, tt := range []struct {
		name   string
		butler string
		ttl    time.Duration
	}{
		{"upper case", "Health", 0},
		{"dot would escape the key", "health.x", 0},
		{"long s folds to s", "healthſ", 0},
		{"negative ttl", "health", -time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, _, err := s.Mint(t.Context(), tt.butler, tt.ttl); !errors.Is(err, token.ErrInvalid) {
				t.Fatalf("Mint(%q, %v) = %v, want ErrInvalid", tt.butler, tt.ttl, err)
			}
		})
	}
}

func TestEqual(t *testing.T) {
	tok := token.NewStatic()
	if !strings.HasPrefix(tok, token.StaticPrefix) || len(tok) != len(token.StaticPrefix)+43 {
		t.Fatalf("NewStatic = %q", tok)
	}
	if !token.Equal(tok, tok) || token.Equal(tok, tok+"x") || token.Equal("", tok) || token.Equal(token.NewStatic(), tok) {
		t.Fatal("Equal compares wrongly")
	}
}

func FuzzParseID(f *testing.F) {
	f.Add("hrt_0123456789abcdef_" + strings.Repeat("A", 43))
	f.Add("hrt_0123456789abcdef_")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		id, ok := token.ParseID(s)
		if !ok {
			return
		}
		// What parses is safe as a KV key part: 16 lower-case hex digits.
		if len(id) != 16 || strings.Trim(id, "0123456789abcdef") != "" || !strings.HasPrefix(s, token.Prefix+id+"_") {
			t.Fatalf("ParseID(%q) = %q", s, id)
		}
	})
}
