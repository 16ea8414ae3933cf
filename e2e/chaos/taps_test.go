//go:build chaos

package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/heraldhq/herald/pkg/bus"
)

// The taps' way (issue 38): a tap on "Got it" made before a note's
// deadline acknowledges it, reaches the model once, and is never overtaken
// by the escalation it acknowledged, whichever switchboard held it when it
// was killed.

const (
	// tapNotes notes are sent, one every tapEvery, each with ack_within
	// tapWithin (the least it may be); every tapControl-th is left untapped,
	// and must escalate once.
	tapNotes   = 20
	tapEvery   = time.Second
	tapWithin  = 30 * time.Second
	tapControl = 6
	// tapDown is how long a killed switchboard stays down.
	tapDown = time.Second
	// tapGraceBound is how long after the last deadline the scenario
	// watches for escalations: longer than the switchboard holds one back
	// for inbound messages not yet handled (its tapGrace, 15 s).
	tapGraceBound = 20 * time.Second
)

// tapLeads are how long before its deadline each tapped note is tapped, in
// turn; at the first of every five the switchboard is killed the moment the
// tap is on the bus: it holds the tap when it dies. Those kills are 6 s
// apart, more than a held tap takes to come back (bus.AckWait, 4 s), so
// each tap is held by one killed switchboard, not by the next one too.
var tapLeads = []time.Duration{2 * time.Second, 4 * time.Second, time.Second, 6 * time.Second, 3 * time.Second}

// tapNote is one note of the taps scenario and what became of it.
type tapNote struct {
	i          int
	tag        string
	deliveryID string
	messageID  int64
	deadline   time.Time
	tapped     bool // false: a control, left to escalate
	lead       time.Duration
	kills      bool // its tap is the moment the switchboard is killed
	tapAt      time.Time
	killAt     time.Time
	// unhandled: the tap was still in HERALD_INGRESS just after the kill
	// (taken by the killed switchboard, not yet acknowledged by it).
	unhandled bool
	// downAtTap: the switchboard was down when it was tapped.
	downAtTap bool
}

var noteTag = regexp.MustCompile(`note (\S+) #(\d{4})`)

// driveTaps is the taps-switchboard-kill scenario: 20 notes with ack_within
// 30s and escalate_to a second bot, each tapped 1–6 s before its deadline
// but every sixth, with the switchboard SIGKILLed and restarted 4 times
// around the taps, each kill the moment a tap is on the bus. It counts
// the escalations of tapped notes (goal 0), the acknowledgements the model
// is told (each once) and the untapped notes' escalations (each once), and
// prints the slowest tap (tap → the model told `acknowledged`).
func driveTaps(f *fleet) {
	escToken := f.withInbound(true)
	f.startServices()
	f.noteAckWaits()
	m := f.connectModel()
	notes := f.sendNotes(m)
	if notes == nil {
		return
	}
	sb := f.svc["switchboard"]

	tapped := slices.DeleteFunc(slices.Clone(notes), func(n *tapNote) bool { return !n.tapped })
	slices.SortFunc(tapped, func(a, b *tapNote) int { return a.deadline.Add(-a.lead).Compare(b.deadline.Add(-b.lead)) })
	var restarts sync.WaitGroup
	for _, n := range tapped {
		time.Sleep(time.Until(n.deadline.Add(-n.lead)))
		var trigger *killTrigger
		if n.kills && !sb.running() {
			f.note("#%04d: the switchboard is still down from the last kill; this tap kills nothing", n.i)
			n.kills = false
		}
		if n.kills {
			// The moment the tap is on the bus, as the switchboard takes it.
			data := []byte("ack:" + n.deliveryID)
			var err error
			if trigger, err = f.armKill(sb, bus.IngressSubject(">"), func(b []byte) bool { return bytes.Contains(b, data) }); err != nil {
				f.fatalf("%v", err)
			}
		}
		n.tapAt, n.downAtTap = time.Now(), !sb.running()
		f.tg.PressButton(f.tg.Token(), person.ID, n.messageID, person, "ack:"+n.deliveryID)
		if trigger == nil {
			continue
		}
		at, seen, err := trigger.wait(5 * time.Second)
		if err != nil {
			f.res.violate("at #%04d's tap: %v", n.i, err)
			continue
		}
		n.killAt, n.unhandled = at, f.inIngress("ack:"+n.deliveryID)
		how := "the moment it was on the bus"
		if !seen {
			how = "5 s after it, the tap not seen on the bus"
		}
		f.note("kill -9 switchboard at %s, %s after #%04d's tap (%s before its deadline), %s; the tap unhandled in %s: %v",
			at.Format("15:04:05.000"), at.Sub(n.tapAt).Round(time.Millisecond), n.i, n.lead, how, bus.StreamIngress, n.unhandled)
		restarts.Go(func() {
			time.Sleep(tapDown)
			if err := f.restart(sb); err != nil {
				f.res.violate("the switchboard did not start again: %v", err)
			}
		})
	}
	restarts.Wait()

	// Every escalation a tapped note could get is out by then; the
	// acknowledgements have come, or get 10 s more.
	last := notes[len(notes)-1].deadline
	for _, n := range notes {
		last = later(last, n.deadline)
	}
	time.Sleep(time.Until(last.Add(tapGraceBound)))
	for wait := time.Now().Add(10 * time.Second); time.Now().Before(wait); time.Sleep(250 * time.Millisecond) {
		if acks := acknowledgements(m.heardSoFar()); len(acks) >= len(tapped) {
			break
		}
	}
	f.tallyTaps(notes, m.heardSoFar(), escToken)
	f.noteWays()
}

// sendNotes sends the scenario's notes through the notify tool, one every
// tapEvery, and finds each one's message with its Got it button and its
// deadline; nil if the scenario cannot go on.
func (f *fleet) sendNotes(m *model) []*tapNote {
	var notes []*tapNote
	start := time.Now()
	for i := range tapNotes {
		time.Sleep(time.Until(start.Add(time.Duration(i) * tapEvery)))
		n := &tapNote{i: i, tag: fmt.Sprintf("note %s #%04d", f.sc.name, i), tapped: (i+1)%tapControl != 0}
		a := call(m.client(), map[string]any{"message": n.tag, "ack_within": tapWithin.String()})
		if a.kind != answerSent || a.deliveryID == "" {
			f.fatalf("note #%04d was answered %s: %s", i, a.kind, firstLine(a.text))
		}
		n.deliveryID = a.deliveryID
		notes = append(notes, n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kv, err := f.js.KeyValue(ctx, bus.BucketSessions)
	if err != nil {
		f.fatalf("%s: %v", bus.BucketSessions, err)
	}
	for _, n := range notes {
		for n.messageID == 0 || n.deadline.IsZero() {
			if ctx.Err() != nil {
				f.fatalf("note #%04d: no message with its Got it button, or no deadline, within 30 s", n.i)
			}
			for _, msg := range f.tg.Messages(person.ID) {
				if strings.Contains(msg.Text, n.tag) && strings.Contains(fmt.Sprint(msg.ReplyMarkup), "ack:"+n.deliveryID) {
					n.messageID = msg.MessageID
				}
			}
			if e, err := kv.Get(ctx, "ack."+n.deliveryID); err == nil {
				var state struct {
					Deadline time.Time `json:"deadline"`
				}
				if json.Unmarshal(e.Value(), &state) == nil {
					n.deadline = state.Deadline
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	tapped := 0
	for _, n := range notes {
		if n.tapped {
			n.lead = tapLeads[tapped%len(tapLeads)]
			n.kills = tapped%len(tapLeads) == 0
			tapped++
		}
	}
	f.note("%d notes sent with ack_within %s (%d to be tapped, %d left to escalate), deadlines %s to %s",
		len(notes), tapWithin, tapped, len(notes)-tapped, notes[0].deadline.Format("15:04:05.000"), notes[len(notes)-1].deadline.Format("15:04:05.000"))
	return notes
}

// inIngress reports whether a message with text is in HERALD_INGRESS
// (not yet handled: the stream is a work queue).
func (f *fleet) inIngress(text string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := f.js.Stream(ctx, bus.StreamIngress)
	if err != nil {
		f.note("%s: %v", bus.StreamIngress, err)
		return false
	}
	st := s.CachedInfo().State
	for seq := st.FirstSeq; st.Msgs > 0 && seq <= st.LastSeq; seq++ {
		if m, err := s.GetMsg(ctx, seq); err == nil && bytes.Contains(m.Data, []byte(text)) {
			return true
		}
	}
	return false
}

// acknowledgements are the model's acknowledged notices, by note delivery id.
func acknowledgements(hs []heard) map[string][]heard {
	out := map[string][]heard{}
	for _, h := range hs {
		if h.meta["kind"] == "acknowledged" {
			out[h.meta["note_delivery_id"]] = append(out[h.meta["note_delivery_id"]], h)
		}
	}
	return out
}

// tallyTaps counts what became of the notes: the model told of each tap
// once, no tapped note escalated, each untapped one escalated once; and
// the scenario's row.
func (f *fleet) tallyTaps(notes []*tapNote, hs []heard, escToken string) {
	acks := acknowledgements(hs)
	escalated := map[int][]time.Time{}
	for _, c := range f.tg.Calls("sendMessage") {
		if !c.OK() || c.Token != escToken {
			continue
		}
		if mt := noteTag.FindStringSubmatch(c.Params["text"]); mt != nil && mt[1] == f.sc.name {
			i, _ := strconv.Atoi(mt[2])
			escalated[i] = append(escalated[i], c.Arrived)
		}
	}
	row := &wayRow{scenario: f.sc.name, fault: f.sc.fault, struck: true}
	f.res.ways = append(f.res.ways, row)
	var overtaken, lost, doubled, controls []string
	held, unhandled, down, controlsOnce := 0, 0, 0, 0
	for _, n := range notes {
		got := acks[n.deliveryID]
		if !n.tapped {
			if len(escalated[n.i]) == 1 {
				controlsOnce++
			}
			after := "never"
			if len(escalated[n.i]) > 0 {
				after = secs(escalated[n.i][0].Sub(n.deadline)) + " after its deadline"
			}
			controls = append(controls, fmt.Sprintf("#%04d escalated %d time(s), first %s", n.i, len(escalated[n.i]), after))
			if len(escalated[n.i]) != 1 {
				row.violate(f, "untapped note #%04d escalated %d times (want once)", n.i, len(escalated[n.i]))
			}
			if len(got) > 0 {
				row.violate(f, "untapped note #%04d: the model was told it was acknowledged", n.i)
			}
			continue
		}
		row.sent++
		how := ""
		if n.kills {
			held++
			how = ", the switchboard killed holding it"
			if n.unhandled {
				unhandled++
				how += " (unhandled at the kill)"
			}
		}
		if n.downAtTap {
			down++
			how += ", made while the switchboard was down"
		}
		told := "never told"
		switch len(got) {
		case 0:
			row.lost++
			lost = append(lost, fmt.Sprintf("#%04d", n.i))
		case 1:
			row.once++
		default:
			row.doubles += len(got) - 1
			doubled = append(doubled, fmt.Sprintf("#%04d %d times", n.i, len(got)))
		}
		if len(got) > 0 {
			took := got[0].at.Sub(n.tapAt)
			row.slowest = max(row.slowest, took)
			told = fmt.Sprintf("told acknowledged %s after the tap", secs(took))
			if n.kills && !n.killAt.IsZero() {
				row.recovery = max(row.recovery, got[0].at.Sub(n.killAt))
				told += fmt.Sprintf(", %s after the kill", secs(got[0].at.Sub(n.killAt)))
			}
		}
		if len(escalated[n.i]) > 0 {
			overtaken = append(overtaken, fmt.Sprintf("#%04d (tapped %s before its deadline%s) escalated %s after the deadline", n.i, n.lead, how, secs(escalated[n.i][0].Sub(n.deadline))))
		}
		f.note("#%04d tapped %s before its deadline%s: %s; escalated %d time(s)", n.i, n.lead, how, told, len(escalated[n.i]))
	}
	f.note("untapped: %s", strings.Join(controls, "; "))
	row.also = fmt.Sprintf("tapped notes escalated: %d of %d; untapped escalated once: %d of %d; taps held by a killed switchboard: %d (unhandled at the kill: %d), made while it was down: %d",
		len(overtaken), row.sent, controlsOnce, len(controls), held, unhandled, down)
	f.note("%s: taps %d, the model told once %d, doubles %d, lost %d; %s; slowest tap %s%s", f.sc.name, row.sent, row.once, row.doubles, row.lost, row.also,
		secs(row.slowest), row.recoveryNote())
	if len(overtaken) > 0 {
		row.violate(f, "%d tapped notes were overtaken by the escalation their tap acknowledged (want 0): %s", len(overtaken), strings.Join(examples(overtaken, 5), "; "))
	}
	if len(lost) > 0 {
		row.violate(f, "%d taps never reached the model as acknowledged (want 0): %s", len(lost), strings.Join(lost, ", "))
	}
	if len(doubled) > 0 {
		row.violate(f, "%d taps reached the model more than once (want once): %s", len(doubled), strings.Join(doubled, ", "))
	}
	if held == 0 {
		row.violate(f, "no tap was held by a killed switchboard; the scenario proved nothing")
	}
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
