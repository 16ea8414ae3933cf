package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/heraldhq/herald/pkg/channel"
	"github.com/heraldhq/herald/pkg/channel/spec"
)

// ChannelSettings are an integration's keys that belong to its channel
// type (spec.Settings): a pointer to the struct of its leaf package under
// pkg/channel, whose yaml tags name the keys.
type ChannelSettings = spec.Settings

// ChannelOf returns what configuration knows of channel type typ: its line
// of pkg/channel's table (channel.Builtin), its keys and what it can do.
func ChannelOf(typ string) (spec.Channel, bool) {
	return channel.Of(typ)
}

// BuiltChannels are the channel types built into Herald: in ChannelTypes'
// order, then any the schemas do not list yet, sorted.
func BuiltChannels() []string {
	var out []string
	for _, t := range ChannelTypes {
		if _, ok := channel.Of(t); ok {
			out = append(out, t)
		}
	}
	var more []string
	for _, c := range channel.Builtin {
		if !slices.Contains(ChannelTypes, c.Type) {
			more = append(more, c.Type)
		}
	}
	slices.Sort(more)
	return append(out, more...)
}

// MessageLimit is how much one message of channel type typ holds: its
// Limit, or spec.WholeLimit. A writer that needs one message (a
// permission prompt and its buttons) fits its text to it.
func MessageLimit(typ string) spec.Limit {
	if c, ok := ChannelOf(typ); ok && c.Limit != nil {
		return *c.Limit
	}
	return spec.WholeLimit
}

// newSettings returns typ's default settings, or nil.
func newSettings(typ string) ChannelSettings {
	c, ok := ChannelOf(typ)
	if !ok || c.Settings == nil {
		return nil
	}
	return c.Settings()
}

// SettingsOf returns the integration's channel settings as T (the channel's
// own pointer type). An integration built in code without settings gets the
// channel's defaults, so only what differs need be written.
func SettingsOf[T ChannelSettings](in *Integration) (T, error) {
	s := in.Settings
	if s == nil {
		s = newSettings(in.Type)
		if d, ok := s.(spec.Defaulter); ok {
			d.Defaults()
		}
	}
	t, ok := s.(T)
	if !ok {
		var zero T
		return zero, fmt.Errorf("%w: integration %q: its settings are %T, not the %s channel's %T", ErrInvalid, in.ID, in.Settings, in.Type, zero)
	}
	return t, nil
}

// CheckedSettings is SettingsOf with the settings' Check run: what a
// channel's sender or receiver takes at start, so an integration built in
// code gets the same checks as one loaded from a file.
func CheckedSettings[T ChannelSettings](in *Integration) (T, error) {
	t, err := SettingsOf[T](in)
	if err != nil {
		return t, err
	}
	if errs := t.Check(in.Facts()); len(errs) > 0 {
		return t, fmt.Errorf("%w: %s integration %q: %s", ErrInvalid, in.Type, in.ID, scrub(strings.Join(errs, "; "), []string{in.ID}))
	}
	return t, nil
}

// Unanswerable says why a question asked of recipient through in could
// never be answered ("" if it can be), and whether another channel is what
// it needs: a channel nobody answers on (log, webhook:
// spec.Channel.Answers), an integration that takes no inbound; or else a
// recipient, where the integration has no default. The butler's ask tool
// refuses such a call with it, and the switchboard such a route.
func (in *Integration) Unanswerable(recipient string) (why string, otherChannel bool) {
	c, _ := ChannelOf(in.Type)
	switch {
	case !c.Answers:
		return in.Channel() + " cannot take an answer", true
	case !in.Inbound.Enabled:
		return in.Channel() + " takes no inbound messages, so no answer could reach Herald", true
	case strings.TrimSpace(recipient) == "" && in.DefaultRecipient() == "":
		return "on " + in.Channel() + " needs a recipient (a chat id, an address, a visitor id): the integration has no default one", false
	}
	return "", false
}

// Facts are what the integration's channel settings may know of it when
// they check themselves (spec.Settings.Check).
func (in *Integration) Facts() spec.Integration {
	return spec.Integration{ID: in.ID, Receives: in.Inbound.Enabled}
}

// DefaultRecipient is where a send through in naming no recipient goes ("" if
// the channel has none).
func (in *Integration) DefaultRecipient() string {
	if r, ok := in.Settings.(spec.Recipients); ok {
		return strings.TrimSpace(r.DefaultRecipient())
	}
	return ""
}
