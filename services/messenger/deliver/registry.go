package deliver

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/heraldhq/herald/pkg/config"
)

// Channel is one channel type of this build: its configuration (its own keys
// and what it can do), its sender and its receiver. Each channel package
// registers one from its init; services/messenger/channels imports them all,
// one line each.
type Channel struct {
	// Type is the channel type, one of the schemas' (config.ChannelTypes).
	Type   string
	Config config.Channel
	// New builds an integration's sender.
	New Factory
	// NewReceiver builds its receiver; nil for a channel that cannot
	// receive, or whose sender also receives (it implements Receiver).
	NewReceiver ReceiverFactory
}

// Receives reports whether the channel takes inbound messages: it has a
// receiver, or its sender receives too (the web chat).
func (c Channel) Receives() bool { return c.NewReceiver != nil || c.Config.AlwaysReceives }

var (
	registryMu sync.RWMutex
	registry   = map[string]Channel{}
)

// Register makes a channel type known to the configuration and the
// messenger. It panics if the type is registered twice, a mistake of the
// build. The schemas' lists follow the registry (`make schemas`).
func Register(c Channel) {
	if c.New == nil {
		panic(fmt.Sprintf("deliver: channel %q registered without a sender", c.Type))
	}
	config.RegisterChannel(c.Type, c.Config)
	registryMu.Lock()
	defer registryMu.Unlock()
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
