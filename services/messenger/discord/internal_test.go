package discord

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	discordspec "github.com/heraldhq/herald/pkg/channel/discord"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/schemas"
)

// TestChannelKinds: a channel no gateway event described is asked about
// once; one that cannot be asked about now counts as plain, and is asked
// about again.
func TestChannelKinds(t *testing.T) {
	asked := map[string]int{}
	fail := true
	k := newChannelKinds(func(_ context.Context, id string) (channelInfo, error) {
		asked[id]++
		if id == "3" && fail {
			return channelInfo{}, errors.New("discord down")
		}
		return channelInfo{ID: id, Type: channelPublicThread, ParentID: "9"}, nil
	})
	k.learnGuild(json.RawMessage(`{"channels":[{"id":"1","type":0}],"threads":[{"id":"2","type":11,"parent_id":"1"}]}`))
	if w := k.where(t.Context(), "1"); w.thread {
		t.Errorf("channel 1 = %+v, want a plain channel", w)
	}
	if w := k.where(t.Context(), "2"); !w.thread || w.parent != "1" {
		t.Errorf("thread 2 = %+v", w)
	}
	for range 2 {
		if w := k.where(t.Context(), "4"); !w.thread || w.parent != "9" {
			t.Errorf("channel 4 = %+v, want what GET /channels said", w)
		}
	}
	if w := k.where(t.Context(), "3"); w.thread {
		t.Errorf("channel 3 = %+v while it cannot be asked about, want plain", w)
	}
	fail = false
	if w := k.where(t.Context(), "3"); !w.thread {
		t.Errorf("channel 3 = %+v once it can be asked about", w)
	}
	if asked["1"]+asked["2"] != 0 || asked["4"] != 1 || asked["3"] != 2 {
		t.Errorf("asked %v", asked)
	}
	k.forgetChannel(json.RawMessage(`{"id":"2"}`))
	if w := k.where(t.Context(), "2"); asked["2"] != 1 || !w.thread {
		t.Errorf("a deleted thread is asked about again: %v", asked)
	}
}

func FuzzParseThread(f *testing.F) {
	for _, s := range []string{"1:2", "1100000000000000011:1100000000000000012", "", ":", "1:", ":2", "1:2:3", "x:y", "C0:1.2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		th, err := parseThread(s)
		if err != nil {
			if !errors.Is(err, envelope.ErrValidation) {
				t.Fatalf("parseThread(%q) error %v is not a validation error", s, err)
			}
			return
		}
		if !snowflakePattern.MatchString(th.channel) || !snowflakePattern.MatchString(th.message) {
			t.Fatalf("parseThread(%q) = %+v", s, th)
		}
		if strings.ContainsAny(th.channel+th.message, "/?#%") {
			t.Fatalf("parseThread(%q) = %+v: a route could be changed", s, th)
		}
	})
}

// FuzzMessageEvent: whatever a gateway sends as MESSAGE_CREATE or
// INTERACTION_CREATE, the receiver makes a valid ingress.v1 of it or none.
func FuzzMessageEvent(f *testing.F) {
	f.Add(`{"id":"11","channel_id":"22","guild_id":"33","author":{"id":"44","username":"ada"},"content":"hi","type":0,"timestamp":"2026-01-01T00:00:00+00:00"}`, false, false)
	f.Add(`{"id":"11","channel_id":"22","author":{"id":"44","global_name":"Ada"},"content":"<@9> hi","type":19,"message_reference":{"message_id":"10"},"attachments":[{"id":"5","filename":"a.png","size":3}]}`, true, false)
	f.Add(`{"id":"11","type":3,"token":"t","channel_id":"22","data":{"custom_id":"perm:allow:abcde","component_type":2},"user":{"id":"44"},"message":{"id":"10"}}`, false, true)
	f.Fuzz(func(t *testing.T, raw string, thread, interaction bool) {
		var in *envelope.Ingress
		if interaction {
			var ev interactionEvent
			if json.Unmarshal([]byte(raw), &ev) != nil {
				return
			}
			in, _ = fromInteraction("discord_main", "9", &ev, where{thread: thread, parent: "1"})
		} else {
			m, err := decodeMessage([]byte(raw))
			if err != nil {
				return
			}
			in, _ = fromMessage("discord_main", "9", m, where{thread: thread, parent: "1"})
		}
		if in == nil {
			return
		}
		if err := envelope.Check(schemas.Ingress, in); err != nil && !strings.Contains(err.Error(), "source_channel") {
			t.Fatalf("ingress of %q is not valid: %v", raw, err)
		}
		for k, v := range in.Meta {
			if !utf8.ValidString(v) && utf8.ValidString(raw) {
				t.Fatalf("meta %s = %q is not UTF-8", k, v)
			}
		}
	})
}

// FuzzChunks: whatever markdown a butler writes, every message sent holds
// at most discordspec.MaxMessage characters and leaves no code block open.
func FuzzChunks(f *testing.F) {
	for _, s := range []string{"**bold** and `code`", "```go\nx\n```", strings.Repeat("word ", 900), "> q\n> " + strings.Repeat("é", 3000), "[a](b) <@1> @everyone"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, md string) {
		for i, c := range chunks(md, discordspec.MaxMessage, func(text string, _, _ int) string { return text }) {
			if n := utf16Len(c); n > discordspec.MaxMessage {
				t.Fatalf("chunk %d of %q holds %d UTF-16 units", i, md, n)
			}
			if strings.TrimSpace(c) == "" {
				t.Fatalf("chunk %d of %q is blank", i, md)
			}
		}
	})
}
