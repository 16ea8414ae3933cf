package obs

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// Version is Herald's version, as its services report it (discovery, MCP).
const Version = "0.1.0"

// Names of the fleet's NATS micro services (architecture.md §9): `nats micro ls`, or a
// request on $SRV.PING, lists every running part.
const (
	ServiceSwitchboard = "herald-switchboard"
	ServiceMessenger   = "herald-messenger"
)

// ServiceButler is the micro service name of butler name.
func ServiceButler(name string) string { return "herald-butler-" + name }

// StatusEndpoint is the name of each service's status endpoint.
const StatusEndpoint = "status"

// StatusSubject is where service answers status requests:
// herald.status.switchboard, herald.status.messenger,
// herald.status.butler-<name>. Every instance answers (no queue group), so
// a request gets the first and a scatter-gather gets every replica.
func StatusSubject(service string) string {
	return "herald.status." + strings.TrimPrefix(service, "herald-")
}

// AddService registers name as a NATS micro service on nc: it answers
// $SRV.PING, $SRV.INFO and $SRV.STATS (for all services, for name, and for
// its instance id) in the micro protocol's formats, and its status endpoint
// with status() as JSON (the service's integrations, receivers, consumer lag,
// last error: what it chooses to say; never a secret). Stop it when its work
// stops. The NATS user needs the subscriptions natsauth.Discovery grants.
//
// It speaks the protocol itself rather than through nats.go/micro, whose
// every subscription has its own goroutine: herald dev runs a service per
// butler, and with 1,000 butlers those were 10,000 goroutines (a quarter of
// an idle butler's memory). Here every subscription of a connection's
// services feeds one channel and one goroutine, and the requests for all
// services ($SRV.PING) are one subscription per connection.
func AddService(nc *nats.Conn, name, version string, status func() any) (*Service, error) {
	s := &Service{name: name, status: status, started: time.Now().UTC(),
		ident:       micro.ServiceIdentity{Name: name, ID: rand.Text(), Version: version, Metadata: map[string]string{}},
		description: "Herald " + strings.TrimPrefix(name, "herald-")}
	for {
		d, err := dispatcherOf(nc)
		if err != nil {
			return nil, fmt.Errorf("micro service %s: %w", name, err)
		}
		s.d = d
		switch err := d.add(s); {
		case errors.Is(err, errStopped):
			continue // its last service stopped meanwhile: a new one starts
		case err != nil:
			return nil, fmt.Errorf("micro service %s: %w", name, err)
		}
		return s, nil
	}
}

// errStopped: the dispatcher stopped with its last service.
var errStopped = errors.New("dispatcher stopped")

// Service is one discoverable part of the fleet (AddService).
type Service struct {
	d           *dispatcher
	name        string
	description string
	ident       micro.ServiceIdentity
	started     time.Time
	status      func() any
	health      atomic.Pointer[Health]
	subs        []*nats.Subscription

	mu       sync.Mutex
	requests int
	failures int
	lastErr  string
	busy     time.Duration
}

// SetHealth makes the status answers carry h's readiness: the process's,
// which every service it runs shares.
func (s *Service) SetHealth(h *Health) { s.health.Store(h) }

// started is when this process started, for the uptime status answers give.
var started = time.Now().UTC()

// ProcessStatus is what every status answer says of the process giving it,
// under "process" beside the service's own fields: which instance, its
// version, since when it runs and whether it is ready, so that `herald
// status` lists processes without a second request.
type ProcessStatus struct {
	Service  string    `json:"service"`
	Instance string    `json:"instance"`
	Version  string    `json:"version"`
	Host     string    `json:"host,omitempty"`
	PID      int       `json:"pid"`
	Started  time.Time `json:"started"`
	// Ready is the process's readiness (/readyz); NotReady names each
	// failing check with why, Degraded each part that cannot work while
	// the rest does.
	Ready    bool              `json:"ready"`
	NotReady map[string]string `json:"not_ready,omitempty"`
	Degraded map[string]string `json:"degraded,omitempty"`
}

var hostname, _ = os.Hostname()

func (s *Service) process() ProcessStatus {
	p := ProcessStatus{Service: s.name, Instance: s.ident.ID, Version: s.ident.Version, Host: hostname, PID: os.Getpid(), Started: started, Ready: true}
	if h := s.health.Load(); h != nil {
		rep := h.Recent(context.Background())
		p.Ready, p.Degraded = rep.Ready, rep.Degraded
		for name, why := range rep.Checks {
			if why != "ok" {
				if p.NotReady == nil {
					p.NotReady = map[string]string{}
				}
				p.NotReady[name] = why
			}
		}
	}
	return p
}

// Stop ends the service: it no longer answers anything.
func (s *Service) Stop() error { return s.d.remove(s) }

func (s *Service) ping() any {
	return micro.Ping{ServiceIdentity: s.ident, Type: micro.PingResponseType}
}

func (s *Service) info() any {
	return micro.Info{ServiceIdentity: s.ident, Type: micro.InfoResponseType, Description: s.description,
		Endpoints: []micro.EndpointInfo{{Name: StatusEndpoint, Subject: StatusSubject(s.name)}}}
}

func (s *Service) stats() any {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := &micro.EndpointStats{Name: StatusEndpoint, Subject: StatusSubject(s.name), NumRequests: s.requests,
		NumErrors: s.failures, LastError: s.lastErr, ProcessingTime: s.busy}
	if s.requests > 0 {
		e.AverageProcessingTime = s.busy / time.Duration(s.requests)
	}
	return micro.Stats{ServiceIdentity: s.ident, Type: micro.StatsResponseType, Started: s.started, Endpoints: []*micro.EndpointStats{e}}
}

// answerStatus answers a request on the status endpoint.
func (s *Service) answerStatus(m *nats.Msg) {
	begin := time.Now()
	b, err := statusJSON(s.process(), s.status())
	if err != nil {
		_ = m.RespondMsg(&nats.Msg{Header: nats.Header{micro.ErrorHeader: []string{"encoding the status: " + err.Error()}, micro.ErrorCodeHeader: []string{"500"}}})
	} else {
		_ = m.Respond(b)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests++
	s.busy += time.Since(begin)
	if err != nil {
		s.failures++
		s.lastErr = err.Error()
	}
}

// statusJSON is a status answer: the service's status object with the
// process's beside its fields, as "process".
func statusJSON(p ProcessStatus, status any) ([]byte, error) {
	b, err := json.Marshal(status)
	if err != nil {
		return nil, err
	}
	pb, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	if len(b) < 2 || b[0] != '{' {
		return json.Marshal(map[string]any{"process": json.RawMessage(pb), "status": json.RawMessage(b)})
	}
	out := append([]byte(`{"process":`), pb...)
	if len(b) > 2 {
		out = append(out, ',')
	}
	return append(out, b[1:]...), nil
}

// dispatcher serves every service on one connection.
type dispatcher struct {
	nc   *nats.Conn
	ch   chan *nats.Msg
	done chan struct{}

	mu       sync.Mutex
	stopped  bool
	services []*Service
	handlers map[*nats.Subscription]func(*nats.Msg)
	shared   []*nats.Subscription // $SRV.PING, $SRV.INFO, $SRV.STATS
}

var (
	dispatchersMu sync.Mutex
	dispatchers   = map[*nats.Conn]*dispatcher{}
)

var verbs = []string{"PING", "INFO", "STATS"}

// dispatcherOf is nc's dispatcher, started with its first service.
func dispatcherOf(nc *nats.Conn) (*dispatcher, error) {
	dispatchersMu.Lock()
	defer dispatchersMu.Unlock()
	if d := dispatchers[nc]; d != nil {
		return d, nil
	}
	// nats.go drops what a full channel cannot take, and a status request
	// reaches every service on the connection at once: herald dev's 1,000
	// butlers, twice over with two herald status asking. The channel holds
	// as many as nats.go's sync subscriptions do (65,536).
	d := &dispatcher{nc: nc, ch: make(chan *nats.Msg, nats.DefaultMaxChanLen), done: make(chan struct{}), handlers: map[*nats.Subscription]func(*nats.Msg){}}
	for _, verb := range verbs {
		sub, err := nc.ChanSubscribe(micro.APIPrefix+"."+verb, d.ch)
		if err != nil {
			for _, s := range d.shared {
				_ = s.Unsubscribe()
			}
			return nil, err
		}
		d.shared = append(d.shared, sub)
		d.handlers[sub] = d.all(verb)
	}
	go d.run()
	dispatchers[nc] = d
	return d, nil
}

func (d *dispatcher) run() {
	for {
		select {
		case m := <-d.ch:
			d.mu.Lock()
			h := d.handlers[m.Sub]
			d.mu.Unlock()
			if h != nil {
				h(m)
			}
		case <-d.done:
			return
		}
	}
}

// all answers a request to every service: once for each of them.
func (d *dispatcher) all(verb string) func(*nats.Msg) {
	return func(m *nats.Msg) {
		d.mu.Lock()
		services := slices.Clone(d.services)
		d.mu.Unlock()
		for _, s := range services {
			respondJSON(m, s.answer(verb))
		}
	}
}

func (s *Service) answer(verb string) any {
	switch verb {
	case "INFO":
		return s.info()
	case "STATS":
		return s.stats()
	}
	return s.ping()
}

func respondJSON(m *nats.Msg, v any) {
	if b, err := json.Marshal(v); err == nil {
		_ = m.Respond(b)
	}
}

// add subscribes s's own subjects: each verb by name and by instance id,
// and its status endpoint (every instance answers: no queue group).
func (d *dispatcher) add(s *Service) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		return errStopped
	}
	sub := func(subject string, h func(*nats.Msg)) error {
		x, err := d.nc.ChanSubscribe(subject, d.ch)
		if err != nil {
			return err
		}
		s.subs = append(s.subs, x)
		d.handlers[x] = h
		return nil
	}
	for _, verb := range verbs {
		h := func(m *nats.Msg) { respondJSON(m, s.answer(verb)) }
		for _, subject := range []string{micro.APIPrefix + "." + verb + "." + s.name, micro.APIPrefix + "." + verb + "." + s.name + "." + s.ident.ID} {
			if err := sub(subject, h); err != nil {
				d.dropLocked(s)
				return err
			}
		}
	}
	if err := sub(StatusSubject(s.name), s.answerStatus); err != nil {
		d.dropLocked(s)
		return err
	}
	d.services = append(d.services, s)
	return nil
}

// remove stops s; the connection's last service takes the dispatcher with it.
func (d *dispatcher) remove(s *Service) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !slices.Contains(d.services, s) {
		return nil
	}
	d.services = slices.DeleteFunc(d.services, func(x *Service) bool { return x == s })
	err := d.dropLocked(s)
	if len(d.services) == 0 {
		d.stopped = true
		dispatchersMu.Lock()
		if dispatchers[d.nc] == d {
			delete(dispatchers, d.nc)
		}
		dispatchersMu.Unlock()
		for _, x := range d.shared {
			_ = x.Unsubscribe()
		}
		close(d.done)
	}
	return err
}

func (d *dispatcher) dropLocked(s *Service) error {
	var first error
	for _, x := range s.subs {
		delete(d.handlers, x)
		if err := x.Unsubscribe(); err != nil && first == nil && !errors.Is(err, nats.ErrConnectionClosed) {
			first = err
		}
	}
	s.subs = nil
	return first
}
