// Package console is the fleet at a glance: what `herald status` prints and
// the operations port's page shows (docs/operations.md "The fleet at a
// glance").
//
//   - Collect asks every running part over NATS: $SRV.PING finds each
//     service instance, then each answers its status endpoint (obs.AddService),
//     which carries its process's version, start and readiness.
//   - Fleet is the snapshot; Text and HTML render it, JSON is its fields.
//   - Page serves it on the operations port's GET /.
package console

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/obs"
)

// Fleet is one snapshot of the running fleet.
type Fleet struct {
	At   time.Time `json:"at"`
	NATS string    `json:"nats"`
	// Processes are the service instances that answered, switchboard
	// first, then messengers, then butlers by name.
	Processes    []Process     `json:"processes"`
	Integrations []Integration `json:"integrations"`
	Queues       Queues        `json:"queues"`
	Butlers      []Butler      `json:"butlers"`
	// Problems are what the snapshot could not learn, each a sentence.
	Problems []string `json:"problems"`
}

// Process is one running service instance: what its status answer says
// of its process, its Service without the herald- prefix (switchboard,
// messenger, butler-<name>).
type Process struct {
	obs.ProcessStatus
	// Runner: a butler's process that starts Claude Code for its messages
	// (herald run, or herald dev with a run block).
	Runner bool `json:"runner,omitempty"`
}

// Integration is one channel account as the messengers see it.
type Integration struct {
	// Channel is type:id.
	Channel string `json:"channel"`
	// Receiver is its receiver's state (running, standby, conflict,
	// error), "" when it receives nothing or no messenger runs it.
	Receiver string `json:"receiver"`
	Detail   string `json:"detail,omitempty"`
	// LastInbound and LastOutbound are its last message in and its last
	// delivery (since its messenger started).
	LastInbound  time.Time `json:"last_inbound,omitzero"`
	LastOutbound time.Time `json:"last_outbound,omitzero"`
	// CannotWork says why it cannot work at all (a secret missing, its
	// receiver in conflict); empty when it can.
	CannotWork string `json:"cannot_work,omitempty"`
}

// Queues are what waits in the fleet.
type Queues struct {
	// RoutesWaiting: notifications the switchboard has not routed yet.
	RoutesWaiting uint64 `json:"routes_waiting"`
	// DeliveriesInFlight: deliveries a messenger has not finished.
	DeliveriesInFlight uint64 `json:"deliveries_in_flight"`
	DeadLetters        uint64 `json:"dead_letters"`
	// Held: notes kept for quiet hours.
	Held          int `json:"held"`
	OpenPrompts   int `json:"open_prompts"`
	OpenQuestions int `json:"open_questions"`
}

// Butler is one butler's sessions, as its instances report them.
type Butler struct {
	Name string `json:"name"`
	// Sessions are its open MCP sessions; Listening those that receive
	// pushed messages; Inbox what waits for it; Unread what was pushed
	// and not answered.
	Sessions  int    `json:"sessions"`
	Listening int    `json:"listening"`
	Inbox     uint64 `json:"inbox"`
	Unread    int    `json:"unread"`
	// Runs are its Claude Code runs (its run block), Working those in a
	// turn; RunnerDown why a process with its run block cannot start one.
	Runner     bool   `json:"runner"`
	Runs       int    `json:"runs"`
	Working    int    `json:"working"`
	RunnerDown string `json:"runner_down,omitempty"`
}

// answer is the part of a status answer the snapshot reads: the common
// process block and the fields of the switchboard's, the messenger's and
// the butler's answers (services/switchboard/core, services/messenger,
// services/butler: Status).
type answer struct {
	Process obs.ProcessStatus `json:"process"`
	// switchboard
	Held          int    `json:"held"`
	OpenPrompts   int    `json:"open_prompts"`
	OpenQuestions int    `json:"open_questions"`
	CountError    string `json:"count_error"`
	// messenger
	Integrations []string             `json:"integrations"`
	Unavailable  map[string]string    `json:"unavailable"`
	Receivers    []receiverState      `json:"receivers"`
	LastOutbound map[string]time.Time `json:"last_outbound"`
	Consumers    []obs.ConsumerState  `json:"consumers"`
	LastError    *obs.ErrorRecord     `json:"last_error"`
	Inbox        *obs.ConsumerState   `json:"inbox"`
	Runner       *runnerState         `json:"runner"`
	// butler
	Butler    string `json:"butler"`
	Sessions  int    `json:"sessions"`
	Listening int    `json:"listening"`
	Unread    int    `json:"unread"`
}

type receiverState struct {
	Integration string    `json:"integration"`
	Channel     string    `json:"channel"`
	State       string    `json:"state"`
	Detail      string    `json:"detail"`
	LastInbound time.Time `json:"last_inbound"`
}

type runnerState struct {
	Unavailable string `json:"unavailable"`
	Runs        int    `json:"runs"`
	Working     int    `json:"working"`
}

// Options tune Collect.
type Options struct {
	// Wait bounds the whole collection (default 3 s).
	Wait time.Duration
	// URL is the NATS server's, as shown (no credentials).
	URL string
}

// pingQuiet is how long Collect waits for more discovery answers after
// the last: every instance answers $SRV.PING at once, without checks.
const pingQuiet = 300 * time.Millisecond

// ErrNoFleet: nothing answered discovery.
var ErrNoFleet = errors.New("no Herald process answered")

// Collect takes a snapshot of the fleet nc reaches. It fails only when
// nothing answers at all (ErrNoFleet); what it could not learn otherwise
// is in the snapshot's Problems.
func Collect(ctx context.Context, nc *nats.Conn, o Options) (*Fleet, error) {
	if o.Wait <= 0 {
		o.Wait = 3 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, o.Wait)
	defer cancel()
	f := &Fleet{At: time.Now().UTC(), NATS: o.URL, Processes: []Process{}, Integrations: []Integration{}, Butlers: []Butler{}, Problems: []string{}}

	pings, err := gather(ctx, nc, []string{micro.APIPrefix + ".PING"}, -1, pingQuiet)
	if err != nil {
		return nil, err
	}
	instances := map[string]int{} // per service name
	for _, b := range pings {
		var p micro.Ping
		if json.Unmarshal(b, &p) == nil && strings.HasPrefix(p.Name, "herald-") {
			instances[p.Name]++
		}
	}
	if len(instances) == 0 {
		return nil, ErrNoFleet
	}
	var subjects []string
	want := 0
	for _, name := range slices.Sorted(maps.Keys(instances)) {
		subjects = append(subjects, obs.StatusSubject(name))
		want += instances[name]
	}
	raw, err := gather(ctx, nc, subjects, want, 0)
	if err != nil {
		return nil, err
	}
	var answers []answer
	got := map[string]int{}
	for _, b := range raw {
		var a answer
		if json.Unmarshal(b, &a) != nil || a.Process.Service == "" {
			continue
		}
		answers = append(answers, a)
		got[a.Process.Service]++
	}
	for _, name := range slices.Sorted(maps.Keys(instances)) {
		if n := instances[name] - got[name]; n > 0 {
			f.Problems = append(f.Problems, fmt.Sprintf("%d instance(s) of %s answered discovery but not their status within %s", n, short(name), o.Wait))
		}
	}
	f.assemble(answers)
	if js, err := jetstream.New(nc); err == nil {
		if n, err := deadLetters(ctx, js); err != nil {
			f.Problems = append(f.Problems, "dead letters: "+err.Error())
		} else {
			f.Queues.DeadLetters = n
		}
	}
	return f, nil
}

// deadLetters is how many messages the dead-letter stream holds.
func deadLetters(ctx context.Context, js jetstream.JetStream) (uint64, error) {
	s, err := js.Stream(ctx, bus.StreamDeadLetter)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return s.CachedInfo().State.Msgs, nil
}

// gather publishes a request on each subject with one reply inbox and
// returns the answers: want of them (or until ctx ends), or, with want < 0,
// until quiet passes without one (or a second without any). The answers
// wait in a sync subscription's buffer (65,536 messages, where nats.go
// drops the rest): a fleet of 1,000 butlers answers at once, faster than
// a loop takes them.
func gather(ctx context.Context, nc *nats.Conn, subjects []string, want int, quiet time.Duration) ([][]byte, error) {
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return nil, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	for _, s := range subjects {
		if err := nc.PublishRequest(s, inbox, nil); err != nil {
			return nil, err
		}
	}
	if err := nc.FlushWithContext(ctx); err != nil {
		return nil, fmt.Errorf("asking the fleet: %w", err)
	}
	var out [][]byte
	for want < 0 || len(out) < want {
		next, cancel := ctx, context.CancelFunc(func() {})
		if want < 0 {
			wait := time.Second // for the first answer
			if len(out) > 0 {
				wait = quiet
			}
			next, cancel = context.WithTimeout(ctx, wait)
		}
		m, err := sub.NextMsgWithContext(next)
		cancel()
		if err != nil {
			break // quiet, or ctx ended
		}
		out = append(out, m.Data)
	}
	return out, nil
}

// short is a service name without its herald- prefix.
func short(service string) string { return strings.TrimPrefix(service, "herald-") }

// order sorts processes: switchboard, messenger, then butlers by name.
func order(p Process) string {
	switch {
	case p.Service == "switchboard":
		return "0"
	case p.Service == "messenger":
		return "1"
	}
	return "2" + p.Service
}

// assemble fills the snapshot from the status answers.
func (f *Fleet) assemble(answers []answer) {
	ints := map[string]*Integration{}
	integration := func(ch string) *Integration {
		if ints[ch] == nil {
			ints[ch] = &Integration{Channel: ch}
		}
		return ints[ch]
	}
	// The switchboard lists every enabled integration, the messengers
	// those they send through: type:id by id, for what they key by id.
	byID := map[string]string{}
	for _, a := range answers {
		if a.Process.Service == obs.ServiceSwitchboard || a.Process.Service == obs.ServiceMessenger {
			for _, ch := range a.Integrations {
				integration(ch)
				_, id, _ := strings.Cut(ch, ":")
				byID[id] = ch
			}
		}
	}
	butlers := map[string]*Butler{}
	for _, a := range answers {
		p := a.Process
		row := Process{ProcessStatus: p, Runner: a.Runner != nil && a.Runner.Unavailable == ""}
		row.Service = short(p.Service)
		f.Processes = append(f.Processes, row)
		switch {
		case p.Service == obs.ServiceSwitchboard:
			f.Queues.Held, f.Queues.OpenPrompts, f.Queues.OpenQuestions = a.Held, a.OpenPrompts, a.OpenQuestions
			if a.CountError != "" {
				f.Problems = append(f.Problems, "switchboard: "+a.CountError)
			}
			f.Queues.RoutesWaiting = max(f.Queues.RoutesWaiting, pending(a.Consumers, bus.StreamRoute, &f.Problems))
		case p.Service == obs.ServiceMessenger:
			f.Queues.DeliveriesInFlight = max(f.Queues.DeliveriesInFlight, pending(a.Consumers, bus.StreamDeliver, &f.Problems))
			for _, r := range a.Receivers {
				in := integration(r.Channel + ":" + r.Integration)
				// A replica's standby yields to another's running.
				if in.Receiver == "" || in.Receiver == "standby" {
					in.Receiver, in.Detail = r.State, r.Detail
				}
				if r.LastInbound.After(in.LastInbound) {
					in.LastInbound = r.LastInbound
				}
			}
			for ch, t := range a.LastOutbound {
				if in := integration(ch); t.After(in.LastOutbound) {
					in.LastOutbound = t
				}
			}
			for id, why := range a.Unavailable {
				ch := cmp.Or(byID[id], id)
				integration(ch).CannotWork = why
			}
		case a.Butler != "":
			b := butlers[a.Butler]
			if b == nil {
				b = &Butler{Name: a.Butler}
				butlers[a.Butler] = b
			}
			b.Sessions += a.Sessions
			b.Listening += a.Listening
			b.Unread = max(b.Unread, a.Unread)
			if a.Inbox != nil {
				b.Inbox = max(b.Inbox, a.Inbox.Pending)
			}
			if a.Runner != nil {
				if a.Runner.Unavailable == "" {
					b.Runner = true
				} else if b.RunnerDown == "" {
					b.RunnerDown = a.Runner.Unavailable
				}
				b.Runs += a.Runner.Runs
				b.Working += a.Runner.Working
			}
		}
	}
	for _, in := range ints {
		if in.CannotWork == "" && (in.Receiver == "conflict" || in.Receiver == "error") {
			in.CannotWork = "its receiver is in " + in.Receiver + ": " + in.Detail
		}
		f.Integrations = append(f.Integrations, *in)
	}
	slices.SortFunc(f.Integrations, func(a, b Integration) int { return strings.Compare(a.Channel, b.Channel) })
	slices.SortStableFunc(f.Processes, func(a, b Process) int {
		return cmp.Or(strings.Compare(order(a), order(b)), strings.Compare(a.Host, b.Host), cmp.Compare(a.PID, b.PID))
	})
	for _, name := range slices.Sorted(maps.Keys(butlers)) {
		f.Butlers = append(f.Butlers, *butlers[name])
	}
}

// pending is what waits on stream's consumer in cs; a consumer that
// could not be asked is a problem.
func pending(cs []obs.ConsumerState, stream string, problems *[]string) uint64 {
	for _, c := range cs {
		if c.Stream != stream {
			continue
		}
		if c.Error != "" {
			*problems = append(*problems, c.Error)
		}
		return c.Pending
	}
	return 0
}

// Ready reports whether every process is ready and every integration can
// work: what `herald status` exits 0 on.
func (f *Fleet) Ready() bool {
	for _, p := range f.Processes {
		if !p.Ready {
			return false
		}
	}
	for _, in := range f.Integrations {
		if in.CannotWork != "" {
			return false
		}
	}
	return true
}
