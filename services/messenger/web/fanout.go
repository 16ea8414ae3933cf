package web

import (
	"context"
	"encoding/json"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/heraldhq/herald/pkg/markdown"
)

// streamBuffer is how many events may wait for one page that reads slowly.
// Past it the page's stream is dropped rather than anyone waiting for it: the
// browser reconnects with Last-Event-ID and catches up from the history.
const streamBuffer = 64

// frame is one conversation event ready for the wire: its id and its JSON,
// rendered once for every page that shows it.
type frame struct {
	seq  uint64
	data []byte
	// typing is "<butler> is typing…" (data its butler), an event of its
	// own that the page hears live only: no seq, never kept.
	typing bool
}

// render turns a stored entry into the event a page gets: butler markdown
// (a message's, an edit's) becomes safe HTML here, never in the browser.
func render(s stored) (frame, error) {
	ev := event{entry: s.entry, Seq: s.seq, Files: links(s)}
	if ev.Kind == kindButler || ev.Kind == kindEdit {
		ev.HTML, ev.Text = markdown.HTML(ev.Text), ""
	}
	data, err := json.Marshal(ev)
	if err != nil {
		return frame{}, err
	}
	return frame{seq: s.seq, data: data}, nil
}

// fanout is the one follower of an integration's conversations in this
// process. Every open event stream listens to it in memory instead of
// holding a consumer of its own, so the number of pages open costs the bus
// nothing.
type fanout struct {
	log *slog.Logger

	mu        sync.Mutex
	live      bool
	up        chan struct{}                     // closed while live
	listeners map[string]map[*listener]struct{} // by visitor
}

// listener is one open event stream.
type listener struct {
	visitor string
	events  chan frame
	// gone is closed when the fan-out drops the stream: it fell behind, or
	// the feed restarted. Either way the page reconnects and catches up.
	gone    chan struct{}
	dropped bool // guarded by fanout.mu
}

func newFanout(log *slog.Logger) *fanout {
	return &fanout{log: log, up: make(chan struct{}), listeners: map[string]map[*listener]struct{}{}}
}

// run keeps one tail of the integration's conversations and hands each entry
// to the pages that show it, until ctx is done. When the tail fails, every
// open stream is dropped (its page reconnects and catches up from the
// history) and a new tail starts after a pause.
func (f *fanout) run(ctx context.Context, st store, integration string) {
	const first, most = time.Second, 30 * time.Second
	pause := first
	for {
		feed, err := st.tail(ctx, integration)
		if err == nil {
			f.setLive(true)
			began := time.Now()
			for m := range feed {
				f.dispatch(m)
			}
			f.setLive(false)
			if time.Since(began) > most {
				pause = first // it ran well; this is a new trouble
			}
		}
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			f.log.Warn("web chat cannot follow its conversations; retrying", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause/2 + rand.N(pause/2)):
		}
		pause = min(2*pause, most)
	}
}

func (f *fanout) setLive(live bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if live == f.live {
		return
	}
	f.live = live
	if live {
		close(f.up)
		return
	}
	f.up = make(chan struct{})
	for _, set := range f.listeners {
		for l := range set {
			f.drop(l)
		}
	}
}

// subscribe adds a stream for visitor's events (theirs and broadcasts),
// waiting until the fan-out is live so that nothing stored from now on can
// pass it by.
func (f *fanout) subscribe(ctx context.Context, visitor string) (*listener, error) {
	for {
		f.mu.Lock()
		if f.live {
			l := &listener{visitor: visitor, events: make(chan frame, streamBuffer), gone: make(chan struct{})}
			set := f.listeners[visitor]
			if set == nil {
				set = map[*listener]struct{}{}
				f.listeners[visitor] = set
			}
			set[l] = struct{}{}
			f.mu.Unlock()
			return l, nil
		}
		up := f.up
		f.mu.Unlock()
		select {
		case <-up:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// unsubscribe removes a stream that ended.
func (f *fanout) unsubscribe(l *listener) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.remove(l)
}

// drop removes l and tells its stream to end. f.mu is held.
func (f *fanout) drop(l *listener) {
	if !l.dropped {
		f.remove(l)
		close(l.gone)
	}
}

// remove forgets l. f.mu is held.
func (f *fanout) remove(l *listener) {
	if l.dropped {
		return
	}
	l.dropped = true
	set := f.listeners[l.visitor]
	delete(set, l)
	if len(set) == 0 {
		delete(f.listeners, l.visitor)
	}
}

// dispatch hands m to the streams of its visitor, or to every stream for a
// broadcast. It never waits for a stream: one that has no room is dropped.
func (f *fanout) dispatch(m stored) {
	visitor := m.subject[strings.LastIndexByte(m.subject, '.')+1:]
	f.mu.Lock()
	wanted := len(f.listeners[visitor]) > 0 || visitor == Broadcast && len(f.listeners) > 0
	f.mu.Unlock()
	if !wanted {
		return // nobody shows it in this process: no need to render it
	}
	fr, err := render(m)
	if err != nil {
		f.log.Warn("web chat entry not shown", "seq", m.seq, "err", err)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if visitor == Broadcast {
		for _, set := range f.listeners {
			f.offer(set, fr)
		}
		return
	}
	f.offer(f.listeners[visitor], fr)
}

// typing shows "typing…" (data) on the streams of visitor. A stream with no
// room misses it, and is not dropped for it: it is gone in seconds anyway.
func (f *fanout) typing(visitor string, data []byte) {
	fr := frame{data: data, typing: true}
	f.mu.Lock()
	defer f.mu.Unlock()
	for l := range f.listeners[visitor] {
		select {
		case l.events <- fr:
		default:
		}
	}
}

// offer gives fr to each stream of set. f.mu is held.
func (f *fanout) offer(set map[*listener]struct{}, fr frame) {
	for l := range set {
		select {
		case l.events <- fr:
		default:
			f.log.Info("web chat page too slow; its stream is dropped and it catches up on reconnecting", "visitor", l.visitor)
			f.drop(l)
		}
	}
}
