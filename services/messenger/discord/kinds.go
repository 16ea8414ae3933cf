package discord

import (
	"context"
	"encoding/json"
	"sync"
)

// Channel types that are threads.
const (
	channelAnnouncementThread = 10
	channelPublicThread       = 11
	channelPrivateThread      = 12
)

// maxKinds bounds the channels remembered; past it the memory starts over
// (what it forgets is asked again, or learnt from the next event).
const maxKinds = 50000

// channelInfo is the part of a channel object Herald reads.
type channelInfo struct {
	ID       string `json:"id"`
	Type     int    `json:"type"`
	ParentID string `json:"parent_id"`
}

func (c channelInfo) where() where {
	switch c.Type {
	case channelAnnouncementThread, channelPublicThread, channelPrivateThread:
		return where{thread: true, parent: c.ParentID}
	}
	return where{}
}

// channelKinds remembers which channels of the bot's servers are threads,
// and of which channel: a message names only its channel, and a thread is a
// channel of its own. The gateway describes them (GUILD_CREATE's channels
// and threads, THREAD_CREATE, THREAD_LIST_SYNC, ...); a channel no event
// described is asked for once (GET /channels/{id}).
type channelKinds struct {
	ask func(ctx context.Context, id string) (channelInfo, error)

	mu    sync.Mutex
	kinds map[string]where
}

func newChannelKinds(ask func(ctx context.Context, id string) (channelInfo, error)) *channelKinds {
	return &channelKinds{ask: ask, kinds: map[string]where{}}
}

// where is what channel id is; a channel that cannot be asked about now
// counts as a plain channel, and is asked about again next time.
func (k *channelKinds) where(ctx context.Context, id string) where {
	k.mu.Lock()
	w, ok := k.kinds[id]
	k.mu.Unlock()
	if ok || k.ask == nil {
		return w
	}
	c, err := k.ask(ctx, id)
	if err != nil {
		return where{}
	}
	c.ID = id
	k.learn(c)
	return c.where()
}

func (k *channelKinds) learn(cs ...channelInfo) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.kinds)+len(cs) > maxKinds {
		k.kinds = map[string]where{}
	}
	for _, c := range cs {
		if snowflakePattern.MatchString(c.ID) {
			k.kinds[c.ID] = c.where()
		}
	}
}

// learnGuild reads GUILD_CREATE's channels and active threads.
func (k *channelKinds) learnGuild(d json.RawMessage) {
	var g struct {
		Channels []channelInfo `json:"channels"`
		Threads  []channelInfo `json:"threads"`
	}
	if json.Unmarshal(d, &g) == nil {
		k.learn(append(g.Channels, g.Threads...)...)
	}
}

// learnChannel reads a channel or thread event's channel.
func (k *channelKinds) learnChannel(d json.RawMessage) {
	var c channelInfo
	if json.Unmarshal(d, &c) == nil {
		k.learn(c)
	}
}

// learnThreads reads THREAD_LIST_SYNC's threads.
func (k *channelKinds) learnThreads(d json.RawMessage) {
	var s struct {
		Threads []channelInfo `json:"threads"`
	}
	if json.Unmarshal(d, &s) == nil {
		k.learn(s.Threads...)
	}
}

// forgetChannel drops a deleted channel or thread.
func (k *channelKinds) forgetChannel(d json.RawMessage) {
	var c channelInfo
	if json.Unmarshal(d, &c) != nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.kinds, c.ID)
}
