package butler

import (
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"
)

// TestClaimantsHoldForTheClaimingSession: a message of a conversation a
// session claimed goes to that session alone; while that session is open
// and takes messages but cannot take this one now, it waits for it up to
// claimHold; a session that never takes messages, or one that ended, hands
// it to every other session.
func TestClaimantsHoldForTheClaimingSession(t *testing.T) {
	c := &channelSide{b: &Butler{name: "finance"}, sessions: map[string]server.ClientSession{}, takes: map[string]bool{}}
	rs := []receiver{{id: "s-two"}, {id: "s-three"}}
	mine := &channelMessage{claim: sessionTag("finance", "s-two")}
	if out, held := c.claimants(rs, mine, 0); held || len(out) != 1 || out[0].id != "s-two" {
		t.Fatalf("claimed by a receiver: got %v held %v, want s-two alone", out, held)
	}
	one := &channelMessage{claim: sessionTag("finance", "s-one")}
	if out, held := c.claimants(rs, one, 0); held || len(out) != 2 {
		t.Fatalf("claimed by a session that is gone: got %v held %v, want every receiver", out, held)
	}
	c.sessions["s-one"] = nil // open, calls tools only
	if out, held := c.claimants(rs, one, 0); held || len(out) != 2 {
		t.Fatalf("claimed by a session that takes no messages: got %v held %v, want every receiver", out, held)
	}
	c.takes["s-one"] = true // it has streamed, or used inbox
	if _, held := c.claimants(rs, one, time.Second); !held {
		t.Fatal("claimed by an open session without its stream: not held for it")
	}
	if out, held := c.claimants(rs, one, claimHold); held || len(out) != 2 {
		t.Fatalf("held past claimHold: got %v held %v, want every receiver", out, held)
	}
	if out, held := c.claimants(rs, &channelMessage{}, 0); held || len(out) != 2 {
		t.Fatalf("an unclaimed message: got %v held %v, want every receiver", out, held)
	}
}
