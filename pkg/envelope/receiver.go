package envelope

import (
	"strings"
	"time"
)

// Receiver states (ReceiverStatus.State).
const (
	ReceiverRunning  = "running"  // receiving
	ReceiverStandby  = "standby"  // another replica holds the poller lease
	ReceiverConflict = "conflict" // the provider says someone else is receiving (Telegram 409)
	ReceiverError    = "error"    // failing; Detail says why
)

// ReceiverStatus is one receiving integration's health, as the messenger
// stores it in herald_status (keyed by integration id) and a butler's
// channel_status tool and herald dev read it.
type ReceiverStatus struct {
	Integration string    `json:"integration"`
	Channel     string    `json:"channel"`
	State       string    `json:"state"`
	Detail      string    `json:"detail,omitempty"`
	LastInbound time.Time `json:"last_inbound,omitzero"`
	Instance    string    `json:"instance,omitempty"`
	UpdatedAt   time.Time `json:"updated_at"`
}

// WebPrefix starts a web chat visitor's sender and chat id ("web:<visitor>");
// approvers, recipients and allow_from name a visitor with it or without.
const WebPrefix = "web:"

// WebVisitor is id without WebPrefix: the visitor a web chat id names.
func WebVisitor(id string) string {
	v, _ := strings.CutPrefix(id, WebPrefix)
	return v
}
