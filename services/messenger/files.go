package messenger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

// A butler's download_attachment asks a messenger (herald.download.<butler>,
// a subject only that butler may publish) for attachment i of an inbound
// message. The messenger is the only holder of channel credentials: it
// checks the message was routed to that butler (the switchboard's
// _routed record, which no butler can write), fetches the file from the
// provider and writes it to herald_files under the butler's own prefix,
// which only that butler may read (bus.FileInSubject).

const (
	// downloadsAtOnce bounds the fetches one messenger runs at a time.
	downloadsAtOnce = 4
	// downloadFor bounds one fetch.
	downloadFor = 5 * time.Minute
)

// downloads answers the butlers' requests until ctx ends; stop waits for
// those in flight.
func (m *Messenger) downloads(ctx context.Context) (stop func(), err error) {
	requests := bus.NewDirectKV(m.js, bus.BucketRequests)
	slots := make(chan struct{}, downloadsAtOnce)
	var wg sync.WaitGroup
	sub, err := m.nc.QueueSubscribe(bus.DownloadSubject("*"), "herald-messenger", func(msg *nats.Msg) {
		butler := strings.TrimPrefix(msg.Subject, bus.DownloadPrefix)
		var req bus.DownloadRequest
		if err := json.Unmarshal(msg.Data, &req); err != nil {
			answerDownload(msg, bus.DownloadAnswer{Error: envelope.ErrorBodyFrom(fmt.Errorf("%w: the request is not JSON: %w", envelope.ErrValidation, err))})
			return
		}
		select {
		case slots <- struct{}{}:
		default:
			answerDownload(msg, bus.DownloadAnswer{Error: envelope.ErrorBodyFrom(fmt.Errorf("%w: the messenger is fetching %d files already; try again in a moment", envelope.ErrOverload, downloadsAtOnce))})
			return
		}
		wg.Go(func() {
			defer func() { <-slots }()
			fetch, cancel := context.WithTimeout(ctx, downloadFor)
			defer cancel()
			a, err := m.download(fetch, requests, butler, req)
			if err != nil {
				m.log.WarnContext(ctx, "an attachment was not fetched", "butler", butler, "request_id", req.RequestID, "index", req.Index, "err", err)
				a = bus.DownloadAnswer{Error: envelope.ErrorBodyFrom(err)}
			}
			answerDownload(msg, a)
		})
	})
	if err != nil {
		return nil, err
	}
	return func() { _ = sub.Unsubscribe(); wg.Wait() }, nil
}

func answerDownload(msg *nats.Msg, a bus.DownloadAnswer) {
	b, _ := json.Marshal(a)
	_ = msg.Respond(b)
}

// download fetches attachment req.Index of req.RequestID for butler into
// herald_files.
func (m *Messenger) download(ctx context.Context, requests bus.KV, butler string, req bus.DownloadRequest) (bus.DownloadAnswer, error) {
	id := req.RequestID
	if id == "" || strings.ContainsAny(id, ".*> ") || strings.ContainsAny(butler, ".*> ") {
		return bus.DownloadAnswer{}, fmt.Errorf("%w: request_id %q is not a message's request_id", envelope.ErrValidation, id)
	}
	e, err := requests.Get(ctx, bus.RoutedKey(butler, id))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return bus.DownloadAnswer{}, fmt.Errorf("%w: request_id %s is not a message routed to %s; you may download only the attachments of your own messages", envelope.ErrForbidden, id, butler)
	}
	if err != nil {
		return bus.DownloadAnswer{}, fmt.Errorf("%w: checking request %s: %w", envelope.ErrTargetUnavailable, id, err)
	}
	var rr bus.RoutedRequest
	if err := json.Unmarshal(e.Value(), &rr); err != nil {
		return bus.DownloadAnswer{}, fmt.Errorf("%w: request %s: %w", envelope.ErrInternal, id, err)
	}
	if req.Index < 0 || req.Index >= len(rr.Attachments) {
		return bus.DownloadAnswer{}, fmt.Errorf("%w: message %s has %d attachment(s); index %d is not one (they count from 0)", envelope.ErrNotFound, id, len(rr.Attachments), req.Index)
	}
	att := rr.Attachments[req.Index]
	in := m.cfg.Integration(rr.Integration)
	if in == nil || in.Disabled || !in.Grants.Allows(butler) {
		return bus.DownloadAnswer{}, fmt.Errorf("%w: integration %s, where message %s came in, is no longer granted to %s", envelope.ErrForbidden, rr.Integration, id, butler)
	}
	fetch, err := m.fetcher(ctx, in, att)
	if err != nil {
		return bus.DownloadAnswer{}, err
	}
	limit := m.cfg.Butler(butler).FileMaxBytes()
	if att.Size > limit {
		return bus.DownloadAnswer{}, fmt.Errorf("%w: %s is %s, over files.max_bytes of butler %s (%s)", envelope.ErrValidation, att.Name, bus.Bytes(att.Size), butler, bus.Bytes(limit))
	}
	// The provider's bytes go into herald_files as they come.
	r, w := io.Pipe()
	fetched := make(chan error, 1)
	go func() {
		err := fetch(w)
		w.CloseWithError(err)
		fetched <- err
	}()
	sum, err := bus.PutFile(ctx, m.js, bus.FileInSubject(butler, id, req.Index), r, limit)
	_ = r.CloseWithError(errors.New("stopped reading"))
	ferr := <-fetched
	switch {
	case errors.Is(err, envelope.ErrValidation):
		return bus.DownloadAnswer{}, fmt.Errorf("%w: %s is over files.max_bytes of butler %s (%s)", envelope.ErrValidation, att.Name, butler, bus.Bytes(limit))
	case err != nil:
		return bus.DownloadAnswer{}, err
	case ferr != nil:
		return bus.DownloadAnswer{}, ferr
	}
	return bus.DownloadAnswer{Name: att.Name, Mime: bus.MediaType(sum.Head, att.Mime), Size: sum.Size, SHA256: sum.SHA256}, nil
}

// fetcher is how attachment att of a message that came in on in is read:
// from herald_files for a file that came with the message (email, web
// chat), else from the provider, with the channel's credentials.
func (m *Messenger) fetcher(ctx context.Context, in *config.Integration, att envelope.Attachment) (func(w io.Writer) error, error) {
	if bus.Held(att.Ref) {
		return func(w io.Writer) error { return bus.GetHeld(ctx, m.nc, in.ID, att.Ref, att.Size, w) }, nil
	}
	f, ok := m.senders[in.ID].(deliver.Fetcher)
	if !ok {
		return nil, fmt.Errorf("%w: %s cannot fetch attachments; ask the person to send the file another way", envelope.ErrValidation, in.Channel())
	}
	return func(w io.Writer) error { return f.Fetch(ctx, att, w) }, nil
}

// spool reads the files of notify n from herald_files into local files,
// checking each against its size and sha256, for the sender to read as
// often as it needs (a photo's dimensions, then its upload). They are
// removed by the returned func. A channel that carries no files, or a file
// over its limit, is refused before anything is read.
func (m *Messenger) spool(ctx context.Context, n *envelope.Notify) ([]deliver.File, func(), error) {
	if len(n.Delivery.Files) == 0 {
		return nil, func() {}, nil
	}
	typ, _, _ := strings.Cut(n.Delivery.Channel, ":")
	ch, _ := config.ChannelOf(typ)
	if ch.MaxFile == 0 {
		return nil, nil, fmt.Errorf("%w: %s cannot carry files; send them another way", envelope.ErrValidation, n.Delivery.Channel)
	}
	dir, err := os.MkdirTemp("", "herald-files-")
	if err != nil {
		return nil, nil, fmt.Errorf("%w: a place for the files: %w", envelope.ErrTargetUnavailable, err)
	}
	done := func() { _ = os.RemoveAll(dir) }
	files := make([]deliver.File, 0, len(n.Delivery.Files))
	for i, f := range n.Delivery.Files {
		if f.Size > ch.MaxFile {
			done()
			return nil, nil, fmt.Errorf("%w: file %s is %s, over %s's limit of %s", envelope.ErrValidation, f.Name, bus.Bytes(f.Size), typ, bus.Bytes(ch.MaxFile))
		}
		path := filepath.Join(dir, strconv.Itoa(i))
		out, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err == nil {
			// The butler's own prefix: the origin butler is the route's,
			// which NATS permissions tie to its credentials.
			err = bus.GetFile(ctx, m.nc, bus.FileOutSubject(n.OriginButler, f.Object), f.Size, f.SHA256, out)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			done()
			return nil, nil, fmt.Errorf("file %s: %w", f.Name, err)
		}
		files = append(files, deliver.File{Name: f.Name, Size: f.Size, MediaType: f.MediaType, SHA256: f.SHA256, Path: path})
	}
	return files, done, nil
}
