package approval

import (
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/heraldhq/herald/pkg/channel/spec"
	"github.com/heraldhq/herald/pkg/markdown"
)

// The prompt an approver reads. The switchboard renders it from the prompt
// it opened (never from text a butler wrote), for the channel it goes to.

// maxToolName bounds the tool's name in a prompt: MCP tool names are far
// shorter, and the preview needs the room.
const maxToolName = 128

// Prompt is the message that asks an approver, as markdown for a channel
// with limit lim:
//
//	🔐 **health** asks to run **Bash**: Run shell command
//
//	```
//	{ "command": "…start of the command
//	```
//
//	⋯ 2381 code points elided ⋯
//
//	```
//	end of the command…" }
//	```
//
//	Reply "yes abcde" or "no abcde" (expires in 10m0s).
//
// Everything the client wrote is shown literally: the tool's name and the
// description escaped, the preview in code blocks no line of it can close
// (Slack's mrkdwn alone has no escape for * _ ~, so a description's *x* may
// show bold there).
// The prompt is one message on every channel, so the approver sees the whole
// of it above the buttons: what does not fit is cut from the middle, keeping
// the start and the end, as Claude Code cuts a long preview. The marker is
// a paragraph of its own between code blocks, so no text of the preview can
// pass for one, and Claude Code's own markers become Herald's: the count
// says how many code points of what the client had the approver does not
// see. When something must go, the description gives way first, down to
// half of the room; the preview, which the approver decides on, takes the
// rest.
func Prompt(butler string, r Request, lim spec.Limit) string {
	tool := parseElided(oneLine(r.ToolName)).keep(maxToolName)
	desc := parseElided(oneLine(r.Description))
	preview := parseElided(r.InputPreview)
	write := func(desc, preview elided) string {
		var s strings.Builder
		s.WriteString("🔐 **" + markdown.Escape(butler) + "** asks to run ")
		if name := tool.inline(); name != "" {
			s.WriteString("**" + name + "**")
		} else {
			s.WriteString("a tool")
		}
		if d := desc.inline(); d != "" {
			s.WriteString(": " + d)
		}
		if p := preview.blocks(); p != "" {
			s.WriteString("\n\n" + p)
		}
		if r.Quorum > 1 {
			s.WriteString("\n\nNeeds " + strconv.Itoa(r.Quorum) + " approvers to allow it; one deny ends it.")
		}
		s.WriteString("\n\nReply \"yes " + r.ID + "\" or \"no " + r.ID + "\"")
		if !r.ExpiresAt.IsZero() {
			s.WriteString(" (expires in " + r.ExpiresAt.Sub(r.CreatedAt).Round(time.Second).String() + ")")
		}
		s.WriteString(".")
		return s.String()
	}
	room := lim.Max - lim.Mark
	if md := write(desc, preview); lim.Size(md) <= room {
		return md
	}
	// The approver decides on the preview: the description gives way first,
	// down to half the room, then the preview takes what is left.
	bare, empty := desc.keep(0), preview.keep(0)
	previewCost := lim.Size(write(bare, preview)) - lim.Size(write(bare, empty))
	descRoom := max(room/2, room-previewCost)
	desc = desc.keep(most(desc.size(), func(k int) bool { return lim.Size(write(desc.keep(k), empty)) <= descRoom }))
	k := most(preview.size(), func(k int) bool { return lim.Size(write(desc, preview.keep(k))) <= room })
	return write(desc, preview.keep(k))
}

// most is the largest k in [0, n] for which fits holds, fits growing with
// k (0 when none does): a binary search, since each try renders a message.
func most(n int, fits func(k int) bool) int {
	if fits(n) {
		return n
	}
	lo, hi := 0, n // fits(lo) is assumed, fits(hi) is false
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if fits(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

// oneLine puts text that is shown within a line on one: Claude Code sends a
// description with its whitespace already collapsed, but other clients may
// not. Lines around an elision marker stay, so that the marker is found.
func oneLine(s string) string {
	lines := strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n")
	out := lines[:0]
	for _, l := range lines {
		if l = strings.Join(strings.Fields(l), " "); l != "" {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// elisionMarker is the line Claude Code puts where it cut a long preview or
// description: its first 2,000 code points, "\n⋯ N code points elided ⋯\n",
// its last 1,500.
var elisionMarker = regexp.MustCompile(`(?:^|\n)⋯ ([1-9][0-9]{0,11}) code points? elided ⋯(?:\n|$)`)

// elided is text with gaps: the code points shown, and where code points
// were left out, by the client or by Herald.
type elided struct {
	text []rune
	gaps []gap // in order of at
}

// gap is n code points left out before text[at].
type gap struct{ at, n int }

func parseElided(s string) elided {
	var e elided
	last := 0
	for _, m := range elisionMarker.FindAllStringSubmatchIndex(s, -1) {
		n, err := strconv.Atoi(s[m[2]:m[3]])
		if err != nil {
			continue
		}
		e.text = append(e.text, []rune(s[last:m[0]])...)
		e.gaps = append(e.gaps, gap{at: len(e.text), n: n})
		last = m[1]
	}
	e.text = append(e.text, []rune(s[last:])...)
	return e
}

// size is the number of code points shown.
func (e elided) size() int { return len(e.text) }

// keep returns e cut to k code points shown: its first 4/7 and last 3/7 (the
// proportion of Claude Code's 2,000 and 1,500), with one gap between them
// that counts the code points cut and the gaps it swallows.
func (e elided) keep(k int) elided {
	if k >= len(e.text) {
		return e
	}
	head := (4*k + 3) / 7
	tailFrom := len(e.text) - (k - head)
	out := elided{text: make([]rune, 0, k)}
	out.text = append(append(out.text, e.text[:head]...), e.text[tailFrom:]...)
	cut := gap{at: head, n: tailFrom - head}
	for _, g := range e.gaps {
		switch {
		case g.at < head:
			out.gaps = append(out.gaps, g)
		case g.at <= tailFrom:
			cut.n += g.n
		}
	}
	out.gaps = append(out.gaps, cut)
	for _, g := range e.gaps {
		if g.at > tailFrom {
			out.gaps = append(out.gaps, gap{at: g.at - tailFrom + head, n: g.n})
		}
	}
	return out
}

// pieces calls text for each run of code points shown and gap for each gap,
// in order.
func (e elided) pieces(text func(string), gap func(n int)) {
	from := 0
	for _, g := range e.gaps {
		if g.at > from {
			text(string(e.text[from:g.at]))
		}
		gap(g.n)
		from = g.at
	}
	if from < len(e.text) {
		text(string(e.text[from:]))
	}
}

// marker is the text of a gap of n code points, as Claude Code writes it.
func marker(n int) string {
	if n == 1 {
		return "⋯ 1 code point elided ⋯"
	}
	return "⋯ " + strconv.Itoa(n) + " code points elided ⋯"
}

// inline is e as escaped markdown within a line, a gap as its marker.
func (e elided) inline() string {
	var parts []string
	e.pieces(func(s string) {
		parts = append(parts, markdown.Escape(s))
	}, func(n int) {
		parts = append(parts, marker(n))
	})
	return strings.TrimSpace(strings.Join(parts, " "))
}

// blocks is e as markdown blocks: each run in a code block, each gap its
// marker in a paragraph between them.
func (e elided) blocks() string {
	var parts []string
	e.pieces(func(s string) {
		if strings.TrimSpace(s) != "" {
			parts = append(parts, markdown.CodeBlock(s))
		}
	}, func(n int) {
		parts = append(parts, marker(n))
	})
	return strings.Join(parts, "\n\n")
}
