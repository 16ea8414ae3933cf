package messenger

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/heraldhq/herald/pkg/obs"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

// Status is the messenger's answer on its status endpoint
// (herald.status.messenger): what an operator asks of a running messenger.
type Status struct {
	Service  string `json:"service"`
	Instance string `json:"instance"`
	// Integrations are those it sends through, as type:id.
	Integrations []string `json:"integrations"`
	// Unavailable are integrations it could not set up, with why.
	Unavailable map[string]string `json:"unavailable"`
	// Receivers are the receiving integrations' states (polling, listening,
	// error, ...).
	Receivers []deliver.Status `json:"receivers"`
	// LastOutbound is when each integration last delivered, since this
	// process started.
	LastOutbound map[string]time.Time `json:"last_outbound"`
	Consumers    []obs.ConsumerState  `json:"consumers"`
	LastError    *obs.ErrorRecord     `json:"last_error"`
}

func (m *Messenger) status() any {
	st := Status{Service: obs.ServiceMessenger, Instance: m.instance, Integrations: []string{}, Unavailable: map[string]string{},
		Receivers: []deliver.Status{}, Consumers: obs.Lag(context.Background(), m.js, consumers...), LastError: m.lastErr.Last()}
	m.mu.Lock()
	st.LastOutbound = maps.Clone(m.lastOut)
	m.mu.Unlock()
	for id := range m.senders {
		if in := m.cfg.Integration(id); in != nil {
			st.Integrations = append(st.Integrations, in.Channel())
		}
	}
	slices.Sort(st.Integrations)
	for id, err := range m.broken {
		st.Unavailable[id] = m.reason(id, err)
	}
	for id, err := range m.deaf {
		if st.Unavailable[id] == "" {
			st.Unavailable[id] = "receiving: " + m.reason(id, err)
		}
	}
	for _, s := range m.receivingSinks() {
		st.Receivers = append(st.Receivers, s.state())
	}
	return st
}

// receivingSinks are the receivers' sinks, by integration id.
func (m *Messenger) receivingSinks() []*sink {
	m.mu.Lock()
	defer m.mu.Unlock()
	ids := slices.Sorted(maps.Keys(m.sinks))
	out := make([]*sink, 0, len(ids))
	for _, id := range ids {
		out = append(out, m.sinks[id])
	}
	return out
}

// integrationsUp is herald_integration_up's source: each enabled
// integration, up unless its sender or receiver could not be set up or its
// receiver is in error.
func (m *Messenger) integrationsUp() map[string]bool {
	up := map[string]bool{}
	for _, in := range m.cfg.Integrations {
		if !in.Disabled {
			up[in.Channel()] = m.broken[in.ID] == nil && m.deaf[in.ID] == nil
		}
	}
	for _, s := range m.receivingSinks() {
		if st := s.state(); st.State == deliver.StateError || st.State == deliver.StateConflict {
			up[s.in.Channel()] = false
		}
	}
	return up
}

// receiverStates is herald_receiver_state's source: each receiving
// integration's state.
func (m *Messenger) receiverStates() map[string]string {
	out := map[string]string{}
	for _, s := range m.receivingSinks() {
		if st := s.state(); st.State != "" {
			out[s.in.Channel()] = st.State
		}
	}
	return out
}

// receiversCheck fails while a receiver is in error (it is restarted with
// a backoff, and says why in its status).
func (m *Messenger) receiversCheck(context.Context) error {
	var bad []string
	for _, s := range m.receivingSinks() {
		if st := s.state(); st.State == deliver.StateError || st.State == deliver.StateConflict {
			bad = append(bad, fmt.Sprintf("%s: %s", s.in.Channel(), st.Detail))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("receivers not running: %s", strings.Join(bad, "; "))
	}
	return nil
}
