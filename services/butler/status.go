package butler

import (
	"context"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/obs"
)

// Status is the butler's answer on its status endpoint
// (herald.status.butler-<name>): what an operator asks of a running butler.
type Status struct {
	Service string `json:"service"`
	Butler  string `json:"butler"`
	// Channels are the integrations granted to it.
	Channels []string `json:"channels"`
	// Sessions is how many MCP sessions it serves now (HTTP and stdio, a
	// run's included); Listening how many of them receive pushed messages.
	Sessions  int `json:"sessions"`
	Listening int `json:"listening"`
	// Runner is its run block's state in this process: nil without one.
	Runner *RunnerStatus     `json:"runner,omitempty"`
	Inbox  obs.ConsumerState `json:"inbox"`
	// Unread is how many messages pushed to its sessions the model has not
	// answered or taken with inbox (unread.go).
	Unread    int              `json:"unread"`
	LastError *obs.ErrorRecord `json:"last_error"`
}

// RunnerStatus is what a butler's runner does (its run block).
type RunnerStatus struct {
	// Unavailable says why this process cannot start Claude Code (its
	// messages wait for herald run where the project is); empty when it can.
	Unavailable string `json:"unavailable,omitempty"`
	// Runs are its Claude Code processes now, Working those in a turn.
	Runs    int `json:"runs"`
	Working int `json:"working"`
}

func (b *Butler) status() any {
	st := Status{Service: obs.ServiceButler(b.name), Butler: b.name, Channels: []string{},
		Sessions: b.channel.sessionCount(), Listening: len(b.channel.receivers()), Runner: b.runner.state(), LastError: b.lastErr.Last()}
	for _, c := range b.channels() {
		st.Channels = append(st.Channels, c.Channel)
	}
	st.Inbox = obs.Lag(context.Background(), b.channel.js, b.inboxConsumer())[0]
	if l, err := b.channel.unread(context.Background()); err == nil {
		st.Unread = len(l.Entries)
	}
	return st
}

// inboxConsumer is the butler's durable inbox consumer.
func (b *Butler) inboxConsumer() obs.Consumer {
	return obs.Consumer{Stream: bus.StreamInbox, Durable: bus.ConsumerInbox(b.name)}
}

// counted counts a sending tool's calls (notify, reply, react) by result: an
// isError answer or a Go error is an error. It also starts the call's trace,
// continuing the client's when the request's _meta carries a traceparent.
func (b *Butler) counted(h server.ToolHandlerFunc) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var parent string
		if m := req.Params.Meta; m != nil {
			parent, _ = m.AdditionalFields[envelope.HeaderTraceparent].(string)
		}
		ctx = envelope.WithTraceparent(ctx, envelope.ChildTraceparent(parent))
		if b.Retired() {
			b.metrics.NotifyCall(b.name, obs.CallError)
			return b.retiredAnswer(), nil
		}
		res, err := h(ctx, req)
		result := obs.CallOK
		if err != nil || res == nil || res.IsError {
			result = obs.CallError
		}
		b.metrics.NotifyCall(b.name, result)
		return res, err
	}
}
