package switchboard_test

import (
	"context"
	"encoding/json"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/switchboard"
	"github.com/heraldhq/herald/services/switchboard/core"
)

const module = "github.com/heraldhq/herald/services/switchboard"

// TestFeaturesStandApart checks the seam docs/extending.md describes: the
// core imports no feature; a feature imports the core and no other
// feature; and every feature package is listed in switchboard.Features, so
// a new one is its folder and that one line.
func TestFeaturesStandApart(t *testing.T) {
	listed := map[string]bool{}
	for _, newFeature := range switchboard.Features {
		name := runtime.FuncForPC(reflect.ValueOf(newFeature).Pointer()).Name() // ".../prompts.New"
		pkg, _, _ := strings.Cut(strings.TrimPrefix(name, module+"/"), ".")
		listed[pkg] = true
	}
	dirs, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		imports := importsOf(t, d.Name())
		var siblings []string
		for _, imp := range imports {
			if rest, ok := strings.CutPrefix(imp, module+"/"); ok {
				siblings = append(siblings, rest)
			} else if imp == module {
				t.Errorf("%s imports the switchboard package, which lists it: a cycle", d.Name())
			}
		}
		switch name := d.Name(); name {
		case "core":
			if slices.ContainsFunc(siblings, func(s string) bool { return s != "pairing" }) {
				t.Errorf("core imports %v: it must know no feature", siblings)
			}
		case "pairing":
			if len(siblings) > 0 {
				t.Errorf("pairing imports %v: it is a store below the core", siblings)
			}
		default:
			if !listed[name] {
				t.Errorf("%s is a folder of the switchboard but not in switchboard.Features; add its New there", name)
			}
			if !slices.Equal(siblings, []string{"core"}) {
				t.Errorf("feature %s imports %v of the switchboard: a feature uses the core only", name, siblings)
			}
		}
	}
	if len(listed) != 5 {
		t.Errorf("switchboard.Features lists %d packages, want the 5 features: %v", len(listed), listed)
	}
}

// importsOf is what the non-test Go files of dir import.
func importsOf(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out
}

// sample is the feature docs/extending.md builds: it follows every notify
// whose message starts with "sample:", and takes every message "!sample".
type sample struct {
	mu       sync.Mutex
	outbound []string // request ids
	outcomes []string
	inbound  []string
	ticks    int
}

func (s *sample) Name() string { return "sample" }

func (s *sample) Outbound(_ context.Context, d *core.Outbound) (bool, error) {
	if !strings.HasPrefix(d.Notify.Delivery.Message, "sample:") {
		return false, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.outbound = append(s.outbound, d.Route.RequestContext.RequestID)
	d.Follow(s.Name())
	return false, nil
}

func (s *sample) Outcome(_ context.Context, o *core.Outcome) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.outcomes = append(s.outcomes, o.RequestID)
	return nil
}

func (s *sample) Inbound(_ context.Context, m *core.Inbound) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inbound = append(s.inbound, m.Msg.Content.Text)
	return m.Msg.Content.Text == "!sample", nil
}

func (s *sample) Tick(context.Context, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ticks++
}

func (s *sample) seen() (outbound, outcomes, inbound []string, ticks int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.outbound), slices.Clone(s.outcomes), slices.Clone(s.inbound), s.ticks
}

// TestASampleFeature adds a feature to switchboard.Features and sees the
// core call it at each of its points: a notify going out and its outcome, a
// message coming in (one it takes never reaches the butler), and the clock.
func TestASampleFeature(t *testing.T) {
	f := newFleet(t)
	s := &sample{}
	f.startWith(t, append(slices.Clone(switchboard.Features), func(context.Context, *core.Env) (core.Feature, error) { return s, nil }))

	// Out: the notify is followed, and its outcome comes back to it.
	nc, js := f.srv.Connect()
	n := envelope.NewNotify("assistant", envelope.Delivery{Channel: "telegram:tg_main", Recipient: "111", Message: "sample: hello"}, nil)
	n.Delivery.Intent = envelope.IntentSend
	r := envelope.NewRoute(n)
	id := r.RequestContext.RequestID
	answers, err := nc.SubscribeSync(bus.ReplySubject("assistant", id))
	if err != nil {
		t.Fatal(err)
	}
	rb, _ := json.Marshal(r)
	if _, err := bus.Publish(t.Context(), js, bus.RouteSubject("assistant"), rb, r.IdempotencyKey(), nil); err != nil {
		t.Fatal(err)
	}
	var relay string
	testkit.Eventually(t, 10*time.Second, func() bool {
		for _, m := range f.stored(t, bus.StreamDeliver, bus.DeliverSubject("messenger")) {
			if strings.Contains(string(m.Data), id) {
				relay = m.Header.Get(bus.HeaderRelay)
				return true
			}
		}
		return false
	}, "the sample's notify handed to the messenger")
	if relay != "sample" {
		t.Errorf("relay header %q, want the sample following it", relay)
	}
	// The messenger's outcome, as it stores it when the switchboard follows.
	b, _ := json.Marshal(envelope.Answer(r, envelope.OK(id, envelope.DeliveryResult{Channel: "telegram:tg_main", MessageIDs: []string{"9"}})))
	m := nats.NewMsg(bus.ResultSubject("assistant", id))
	m.Data = b
	m.Header.Set(bus.HeaderRelay, relay)
	m.Header.Set(bus.HeaderChannel, "telegram:tg_main")
	if _, err := js.PublishMsg(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	answer, err := answers.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatalf("the butler was not told the outcome: %v", err)
	}
	_ = answer.Respond(nil)
	if _, outcomes, _, _ := s.seen(); !slices.Equal(outcomes, []string{id}) {
		t.Errorf("the sample saw outcomes %v before the butler was told, want %s", outcomes, id)
	}

	// In: a message it takes goes no further; another goes on.
	taken := f.send(t, "telegram", telegram("tg_main", "111", "", "", "!sample"))
	passed := f.send(t, "telegram", telegram("tg_main", "111", "", "", "hello"))
	butler := f.handled(t, passed)[0].Butler
	_, _, inbound, _ := s.seen()
	if !slices.Equal(inbound, []string{"!sample", "hello"}) {
		t.Errorf("the sample saw %q coming in, want both messages", inbound)
	}
	var reached []string
	for _, r := range f.inbox(t, butler) {
		reached = append(reached, r.Input.Context.Ingress.RequestContext.RequestID)
	}
	if slices.Contains(reached, taken.RequestContext.RequestID) || !slices.Contains(reached, passed.RequestContext.RequestID) {
		t.Errorf("the butler got %v; want %s, which the sample let pass, and not %s, which it took", reached, passed.RequestContext.RequestID, taken.RequestContext.RequestID)
	}
	outbound, _, _, _ := s.seen()
	if !slices.Equal(outbound, []string{id}) {
		t.Errorf("the sample saw %v going out, want %s", outbound, id)
	}
	testkit.Eventually(t, 10*time.Second, func() bool { _, _, _, ticks := s.seen(); return ticks > 0 }, "a tick")
}
