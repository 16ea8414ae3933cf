package ratelimit

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// state is the value of an account's key (docs/reliability.md shows its
// JSON). Zero times are "none"; every time is in UTC.
type state struct {
	// Bot is the account's PerBot schedule.
	Bot schedule `json:"bot,omitzero"`
	// Pause is when the account may send again after a provider's 429.
	Pause time.Time `json:"pause,omitzero"`
	// Chats holds the chats with a time still ahead.
	Chats map[string]chatState `json:"chats,omitempty"`
}

// chatState is one chat's part of the state.
type chatState struct {
	// TAT is the chat's theoretical arrival time under PerChat.
	TAT time.Time `json:"tat,omitzero"`
	// Group is the chat's theoretical arrival time under PerGroup.
	Group time.Time `json:"group,omitzero"`
	// Pause is when the chat may get messages again after a 429.
	Pause time.Time `json:"pause,omitzero"`
}

func (c chatState) isZero() bool { return c.TAT.IsZero() && c.Group.IsZero() && c.Pause.IsZero() }

// schedule is GCRA for reservations made out of order: TAT is the
// theoretical arrival time after the slots already past, Slots (sorted) the
// ones still ahead. A reservation may fill a gap between slots ahead, so a
// message reserved for later does not hold up the others.
type schedule struct {
	TAT   time.Time   `json:"tat,omitzero"`
	Slots []time.Time `json:"slots,omitempty"`
}

// reserve takes the earliest time from now that keeps every limit and pause
// that applies to chat, and records it.
func (s *state) reserve(lim Limits, now time.Time, chat string, group bool) time.Time {
	at := later(now, s.Pause)
	var c chatState
	if chat != "" {
		c = s.Chats[chat]
		at = later(at, c.Pause, earliest(lim.PerChat, c.TAT))
		if group {
			at = later(at, earliest(lim.PerGroup, c.Group))
		}
	}
	at = s.Bot.earliest(lim.PerBot, norm(at))
	s.Bot.add(lim.PerBot, at)
	if chat != "" {
		c.TAT = next(lim.PerChat, c.TAT, at)
		if group {
			c.Group = next(lim.PerGroup, c.Group, at)
		}
		s.setChat(chat, c)
	}
	return at
}

// pause records a pause of the account (chat "") or of chat until until,
// and reports whether it lengthened one.
func (s *state) pause(chat string, until, now time.Time) bool {
	until = norm(until)
	if !until.After(now) {
		return false
	}
	if chat == "" {
		if !until.After(s.Pause) {
			return false
		}
		s.Pause = until
		return true
	}
	c := s.Chats[chat]
	if !until.After(c.Pause) {
		return false
	}
	c.Pause = until
	s.setChat(chat, c)
	return true
}

// settle drops what has passed by now, so the value stays small.
func (s *state) settle(lim Limits, now time.Time) {
	s.Bot.settle(lim.PerBot, now)
	s.Pause = ahead(s.Pause, now)
	for id, c := range s.Chats {
		c = chatState{TAT: ahead(c.TAT, now), Group: ahead(c.Group, now), Pause: ahead(c.Pause, now)}
		if c.isZero() {
			delete(s.Chats, id)
		} else {
			s.Chats[id] = c
		}
	}
	if len(s.Chats) == 0 {
		s.Chats = nil
	}
}

// merge adds o to s, keeping the later of each time and the slots of both
// (a slot in both counts once).
func (s *state) merge(o *state) {
	s.Bot.TAT = later(s.Bot.TAT, o.Bot.TAT)
	s.Bot.Slots = mergeSlots(s.Bot.Slots, o.Bot.Slots)
	s.Pause = later(s.Pause, o.Pause)
	for id, oc := range o.Chats {
		c := s.Chats[id]
		s.setChat(id, chatState{
			TAT:   later(c.TAT, oc.TAT),
			Group: later(c.Group, oc.Group),
			Pause: later(c.Pause, oc.Pause),
		})
	}
}

func (s *state) setChat(id string, c chatState) {
	if c.isZero() {
		delete(s.Chats, id)
		return
	}
	if s.Chats == nil {
		s.Chats = map[string]chatState{}
	}
	s.Chats[id] = c
}

// earliest is the first time from t that fits r with the slots ahead.
//
// Between two slots ahead, a time fits if it is no earlier than TAT (after
// the slots before it) less the tolerance, and if the slots after it still
// fit, which only gets harder later in the gap; so the first time that fits
// is the start of a gap's admissible part, one per gap, tried in order. After
// the last slot a time always fits.
func (s *schedule) earliest(r Rate, t time.Time) time.Time {
	T, tau := r.interval(), r.tolerance()
	if T == 0 {
		return t
	}
	tat := s.TAT
	for i := 0; ; i++ {
		c := later(t, tat.Add(-tau))
		if i > 0 {
			c = later(c, s.Slots[i-1])
		}
		if i == len(s.Slots) || s.fits(r, c) {
			return c
		}
		tat = later(tat, s.Slots[i]).Add(T)
	}
}

// fits reports whether the slots ahead, with t added, all keep r.
func (s *schedule) fits(r Rate, t time.Time) bool {
	T, tau := r.interval(), r.tolerance()
	tat := s.TAT
	ok := func(a time.Time) bool {
		if a.Before(tat.Add(-tau)) {
			return false
		}
		tat = later(tat, a).Add(T)
		return true
	}
	added := false
	for _, a := range s.Slots {
		if !added && t.Before(a) {
			if !ok(t) {
				return false
			}
			added = true
		}
		if !ok(a) {
			return false
		}
	}
	return added || ok(t)
}

// add records a slot at t, after any equal one.
func (s *schedule) add(r Rate, t time.Time) {
	if r.interval() == 0 {
		return
	}
	i := sort.Search(len(s.Slots), func(i int) bool { return s.Slots[i].After(t) })
	s.Slots = slices.Insert(s.Slots, i, t)
}

// settle folds the slots up to now into TAT.
func (s *schedule) settle(r Rate, now time.Time) {
	T := r.interval()
	if T == 0 {
		*s = schedule{}
		return
	}
	i := 0
	for ; i < len(s.Slots) && !s.Slots[i].After(now); i++ {
		s.TAT = later(s.TAT, s.Slots[i]).Add(T)
	}
	s.Slots = slices.Clone(s.Slots[i:])
	if len(s.Slots) == 0 {
		s.Slots = nil
	}
	s.TAT = ahead(s.TAT, now)
}

// mergeSlots merges two sorted lists, a time in both as many times as in
// the one that has it more often.
func mergeSlots(a, b []time.Time) []time.Time {
	var out []time.Time
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || (i < len(a) && a[i].Before(b[j])):
			out = append(out, a[i])
			i++
		case i == len(a) || b[j].Before(a[i]):
			out = append(out, b[j])
			j++
		default: // equal
			out = append(out, a[i])
			i++
			j++
		}
	}
	return out
}

// earliest is the first time tat allows under r (zero if any).
func earliest(r Rate, tat time.Time) time.Time {
	if r.interval() == 0 || tat.IsZero() {
		return time.Time{}
	}
	return tat.Add(-r.tolerance())
}

// next is tat after an event at at.
func next(r Rate, tat, at time.Time) time.Time {
	T := r.interval()
	if T == 0 {
		return time.Time{}
	}
	return later(tat, at).Add(T)
}

func later(t time.Time, more ...time.Time) time.Time {
	for _, u := range more {
		if u.After(t) {
			t = u
		}
	}
	return t
}

// ahead is t if it is after now, else zero.
func ahead(t, now time.Time) time.Time {
	if t.After(now) {
		return t
	}
	return time.Time{}
}

// norm makes t as it reads back from JSON: UTC, no monotonic reading.
func norm(t time.Time) time.Time { return t.Round(0).UTC() }

// key is the KV key of scope: "ratelimit." and the scope, with each byte a
// key cannot hold written =XX ('=' too, so two scopes never share a key), as
// is a '.' that would start, end or double a token.
func key(scope string) string {
	var b strings.Builder
	b.WriteString("ratelimit.")
	if scope == "" {
		b.WriteString("=")
		return b.String()
	}
	for i := 0; i < len(scope); i++ {
		c := scope[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_', c == '/':
			b.WriteByte(c)
		case c == '.' && i > 0 && i < len(scope)-1 && scope[i-1] != '.':
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "=%02X", c)
		}
	}
	return b.String()
}
