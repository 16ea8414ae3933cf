package approval

import (
	"slices"
	"strings"
	"testing"
	"time"

	slackspec "github.com/heraldhq/herald/pkg/channel/slack"
	"github.com/heraldhq/herald/pkg/channel/spec"
	telegramspec "github.com/heraldhq/herald/pkg/channel/telegram"
)

func TestElidedKeep(t *testing.T) {
	tests := []struct {
		name string
		text string
		keep int
		want string // inline
	}{
		{"all kept", "abcdefg", 7, "abcdefg"},
		{"start and end", "abcdefghijklmn", 7, "abcd ⋯ 7 code points elided ⋯ lmn"},
		{"one cut", "abc", 2, "a ⋯ 1 code point elided ⋯ c"},
		{"nothing kept", "abc", 0, "⋯ 3 code points elided ⋯"},
		{"code points, not bytes", "ééééééé", 4, "éé ⋯ 3 code points elided ⋯ éé"},
		{"Claude Code's marker kept", "abcd\n⋯ 100 code points elided ⋯\nwxyz", 8, "abcd ⋯ 100 code points elided ⋯ wxyz"},
		{"Claude Code's marker counted in the cut", "abcd\n⋯ 100 code points elided ⋯\nwxyz", 4, "ab ⋯ 104 code points elided ⋯ yz"},
		{"two markers in one cut", "aaaa\n⋯ 10 code points elided ⋯\nbbbb\n⋯ 20 code points elided ⋯\ncccc", 6, "aaa ⋯ 36 code points elided ⋯ ccc"},
		{"a marker outside the cut stays", "aa\n⋯ 1 code point elided ⋯\n" + strings.Repeat("b", 20), 12, "aa ⋯ 1 code point elided ⋯ bbbbb ⋯ 10 code points elided ⋯ bbbbb"},
		{"a marker within a line is text", "x ⋯ 5 code points elided ⋯ y", 100, "x ⋯ 5 code points elided ⋯ y"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := parseElided(tt.text).keep(tt.keep).inline(); got != tt.want {
				t.Errorf("keep(%d) of %q = %q, want %q", tt.keep, tt.text, got, tt.want)
			}
		})
	}
}

// FuzzElidedKeep: a cut keeps the start and the end, and the code points
// shown and counted are those of the text.
func FuzzElidedKeep(f *testing.F) {
	f.Add("abcd\n⋯ 100 code points elided ⋯\nwxyz", 3)
	f.Add("aaaa\n⋯ 10 code points elided ⋯\nbbbb\n⋯ 20 code points elided ⋯\ncccc", 6)
	f.Add("⋯ 2 code points elided ⋯\n", 0)
	f.Fuzz(func(t *testing.T, text string, k int) {
		e := parseElided(text)
		k = max(k, -k) % (e.size() + 1)
		got := e.keep(k)
		if got.size() != k {
			t.Fatalf("keep(%d) shows %d code points", k, got.size())
		}
		if count(got) != count(e) {
			t.Fatalf("keep(%d) of %q accounts for %d code points, want %d", k, text, count(got), count(e))
		}
		head := (4*k + 3) / 7
		if !slices.Equal(got.text[:head], e.text[:head]) || !slices.Equal(got.text[head:], e.text[e.size()-(k-head):]) {
			t.Fatalf("keep(%d) of %q shows %q, not its start and end", k, text, string(got.text))
		}
	})
}

func count(e elided) int {
	n := e.size()
	for _, g := range e.gaps {
		n += g.n
	}
	return n
}

// FuzzPromptFits: whatever the client sends, the prompt is one message on
// every channel.
func FuzzPromptFits(f *testing.F) {
	// Seeds long enough to be cut on Telegram and Slack, short enough for
	// the fuzzer to mutate quickly.
	f.Add("Run shell command", "x\n⋯ 4000 code points elided ⋯\n"+strings.Repeat("a && b > c", 200))
	f.Add(strings.Repeat("<&>", 400), strings.Repeat("&", 1500))
	f.Add(strings.Repeat("`", 300), strings.Repeat("`\n", 800))
	f.Fuzz(func(t *testing.T, desc, preview string) {
		if len(desc)+len(preview) > 1<<15 {
			t.Skip("a client's notification is far shorter")
		}
		req := Request{ID: "abcde", ToolName: "Bash", Description: desc, InputPreview: preview, CreatedAt: created, ExpiresAt: created.Add(10 * time.Minute)}
		for _, lim := range []spec.Limit{telegramspec.Limit, slackspec.Limit, spec.WholeLimit} {
			if md := Prompt("health", req, lim); !lim.Fits(md) {
				t.Fatalf("a prompt of %d for a limit of %d: %q", lim.Size(md)+lim.Mark, lim.Max, md)
			}
		}
	})
}

// created is when the prompts of these tests were opened: each expires 10
// minutes later, as approvals.expire_after's default has it.
var created = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

// TestPromptSaysWhenItExpires: a prompt says how long it can be answered,
// and one that never expires (approvals.expire_after: 0) says nothing of it.
func TestPromptSaysWhenItExpires(t *testing.T) {
	req := Request{ID: "abcde", ToolName: "Bash", CreatedAt: created, ExpiresAt: created.Add(90 * time.Second)}
	if md := Prompt("health", req, telegramspec.Limit); !strings.HasSuffix(md, `Reply "yes abcde" or "no abcde" (expires in 1m30s).`) {
		t.Errorf("a prompt open for 90 s ends %q", md[max(0, len(md)-60):])
	}
	req.ExpiresAt = time.Time{}
	if md := Prompt("health", req, telegramspec.Limit); !strings.HasSuffix(md, `Reply "yes abcde" or "no abcde".`) {
		t.Errorf("a prompt that never expires ends %q", md[max(0, len(md)-60):])
	}
}
