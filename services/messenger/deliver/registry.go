package deliver

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/heraldhq/herald/pkg/config"
)

// Channel is one channel type's sender and receiver in this build. What
// the type is configured with and what it can do is its pkg/channel leaf's
// (config.ChannelOf reads it), so that binaries without the messenger read
// herald.yaml too. Each channel package registers its Channel from its
// init; services/messenger/channels imports them all, one line each.
type Channel struct {
	// Type is the channel type, one of config's (config.BuiltChannels).
	Type string
	// New builds an integration's sender.
	New Factory
	// NewReceiver builds its receiver; nil for a channel that cannot
	// receive, or whose sender also receives (it implements Receiver).
	NewReceiver ReceiverFactory
}

// Receives reports whether the channel takes inbound messages: it has a
// receiver, or its sender receives too (the web chat).
func (c Channel) Receives() bool {
	cfg, _ := config.ChannelOf(c.Type)
	return c.NewReceiver != nil || cfg.AlwaysReceives
}

var (
	registryMu sync.RWMutex
	registry   = map[string]Channel{}
)

// Register makes a channel type's sender and receiver known to the
// messenger. It panics if the type is registered twice or without a
// sender, a mistake of the build.
func Register(c Channel) {
	if c.New == nil {
		panic(fmt.Sprintf("deliver: channel %q registered without a sender", c.Type))
	}
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := registry[c.Type]; dup {
		panic(fmt.Sprintf("deliver: channel %q registered twice", c.Type))
	}
	registry[c.Type] = c
}

// Lookup returns the registered channel of a type.
func Lookup(typ string) (Channel, bool) {
	registryMu.RLock()
	defer registryMu.RUnlock()
	c, ok := registry[typ]
	return c, ok
}

// Channels are the registered channels, by type.
func Channels() []Channel {
	registryMu.RLock()
	defer registryMu.RUnlock()
	return slices.SortedFunc(maps.Values(registry), func(a, b Channel) int { return cmp.Compare(a.Type, b.Type) })
}
