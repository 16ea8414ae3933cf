package config

import (
	"fmt"

	"go.yaml.in/yaml/v3"
)

// Topics is a Telegram integration's topics key (architecture.md §11): whether each
// butler's messages to a forum group go into a topic of the butler's own.
//
//	topics: per_butler
type Topics string

// Topics values. Unset is TopicsOff.
const (
	// TopicsOff: every message goes where it is addressed, topics or not.
	TopicsOff Topics = "off"
	// TopicsPerButler: a butler's messages to a group go into its own forum
	// topic, made on first use and kept across restarts; what a person
	// writes in that topic reaches that butler. A group that is not a forum
	// is an error at the first send, not a quiet fallback.
	TopicsPerButler Topics = "per_butler"
)

// PerButler reports whether topics is per_butler.
func (t Topics) PerButler() bool { return t == TopicsPerButler }

// UnmarshalYAML refuses any value but off and per_butler, naming the line.
func (t *Topics) UnmarshalYAML(n *yaml.Node) error {
	v := Topics(n.Value)
	if n.Kind != yaml.ScalarNode || !v.valid() {
		return typeError(n, "topics %s must be off or per_butler (per_butler: each butler's messages to a Telegram forum group go into a topic of its own)", quoteNode(n))
	}
	*t = v
	return nil
}

func (t Topics) valid() bool { return t == "" || t == TopicsOff || t == TopicsPerButler }

// quoteNode is how an error shows the value written: quoted, or "(not a
// word)" for a list or mapping.
func quoteNode(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode {
		return fmt.Sprintf("%q", n.Value)
	}
	return "(not a word)"
}

// checkTopics is Validate's step for the integrations' topics key: only a
// channel with forum topics (spec.Channel.Topics: Telegram's) takes
// per_butler, and only off and per_butler are values (an
// integration built in code is checked here as one read from a file is
// when it is decoded).
func (c *Config) checkTopics(add func(format string, a ...any)) {
	for i, in := range c.Integrations {
		at := fmt.Sprintf("integrations[%d].topics", i)
		switch {
		case !in.Topics.valid():
			add("%s %q must be off or per_butler", at, string(in.Topics))
		case in.Topics.PerButler() && !channelHasTopics(in.Type):
			add("%s: per_butler puts each butler's messages in a Telegram forum topic; %s is a %s integration, which has no topics", at, in.ID, in.Type)
		}
	}
}

// channelHasTopics reports whether channel type typ has forum topics.
func channelHasTopics(typ string) bool {
	ch, _ := ChannelOf(typ)
	return ch.Topics
}
