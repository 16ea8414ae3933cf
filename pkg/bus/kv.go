package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// KV is the part of a key-value bucket Herald's services use; a
// jetstream.KeyValue is one, and so is a DirectKV.
type KV interface {
	Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error)
	Put(ctx context.Context, key string, value []byte) (uint64, error)
	Create(ctx context.Context, key string, value []byte, opts ...jetstream.KVCreateOpt) (uint64, error)
	Update(ctx context.Context, key string, value []byte, revision uint64) (uint64, error)
}

// DirectKV reads and writes one bucket's keys with nothing but the subjects of
// those keys: a direct get of $KV.<bucket>.<key> and a publish to it. Binding
// a jetstream.KeyValue asks for the stream's info, and a user allowed that can
// list every key of the bucket (STREAM.INFO with a subjects filter); a butler,
// allowed only its own keys' subjects, uses this instead.
type DirectKV struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	bucket string
}

// NewDirectKV is bucket's keys through js's connection.
func NewDirectKV(js jetstream.JetStream, bucket string) *DirectKV {
	return &DirectKV{nc: js.Conn(), js: js, bucket: bucket}
}

func (d *DirectKV) subject(key string) string { return "$KV." + d.bucket + "." + key }

// Get returns the key's latest value; jetstream.ErrKeyNotFound if it has
// none or was deleted.
func (d *DirectKV) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
	}
	m, err := d.nc.RequestWithContext(ctx, "$JS.API.DIRECT.GET.KV_"+d.bucket+"."+d.subject(key), nil)
	if err != nil {
		return nil, fmt.Errorf("reading %s %s: %w", d.bucket, key, err)
	}
	if len(m.Data) == 0 && m.Header.Get("Status") != "" {
		if m.Header.Get("Status") == "404" {
			return nil, jetstream.ErrKeyNotFound
		}
		return nil, fmt.Errorf("reading %s %s: %s %s", d.bucket, key, m.Header.Get("Status"), m.Header.Get("Description"))
	}
	switch m.Header.Get("KV-Operation") {
	case "DEL", "PURGE":
		return nil, jetstream.ErrKeyNotFound
	}
	seq, err := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("reading %s %s: no sequence in the answer", d.bucket, key)
	}
	created, _ := time.Parse(time.RFC3339Nano, m.Header.Get(jetstream.TimeStampHeaer))
	return &entry{bucket: d.bucket, key: key, value: m.Data, rev: seq, created: created}, nil
}

// Put writes the key.
func (d *DirectKV) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	return d.publish(ctx, key, value, nil)
}

// Create writes the key only if it has no value; jetstream.ErrKeyExists
// otherwise.
func (d *DirectKV) Create(ctx context.Context, key string, value []byte, _ ...jetstream.KVCreateOpt) (uint64, error) {
	zero := uint64(0)
	rev, err := d.publish(ctx, key, value, &zero)
	if isWrongLast(err) {
		return 0, jetstream.ErrKeyExists
	}
	return rev, err
}

// Update writes the key only if its latest revision is revision.
func (d *DirectKV) Update(ctx context.Context, key string, value []byte, revision uint64) (uint64, error) {
	return d.publish(ctx, key, value, &revision)
}

func (d *DirectKV) publish(ctx context.Context, key string, value []byte, last *uint64) (uint64, error) {
	m := &nats.Msg{Subject: d.subject(key), Data: value, Header: nats.Header{}}
	if last != nil {
		m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(*last, 10))
	}
	ack, err := d.js.PublishMsg(ctx, m)
	if err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}

func isWrongLast(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence
}

// entry is a jetstream.KeyValueEntry read directly.
type entry struct {
	bucket, key string
	value       []byte
	rev         uint64
	created     time.Time
}

func (e *entry) Bucket() string                  { return e.bucket }
func (e *entry) Key() string                     { return e.key }
func (e *entry) Value() []byte                   { return e.value }
func (e *entry) Revision() uint64                { return e.rev }
func (e *entry) Created() time.Time              { return e.created }
func (e *entry) Delta() uint64                   { return 0 }
func (e *entry) Operation() jetstream.KeyValueOp { return jetstream.KeyValuePut }

// ChangeJSON applies f to the JSON record at key by compare-and-set: f
// changes it (a zero T if the key has none, and found false) and says
// whether to store it; an error from f stores nothing and is returned. A
// failed write is a change made meanwhile (read again, f sees it) or NATS's
// fault (read again, that fails too). ErrKeyNotFound is returned only by a
// kv whose Get fails so for a reason of its own.
func ChangeJSON[T any](ctx context.Context, kv KV, key string, f func(v *T, found bool) (bool, error)) error {
	for range 5 {
		var v T
		e, err := kv.Get(ctx, key)
		found := err == nil
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return err
		default:
			if err := json.Unmarshal(e.Value(), &v); err != nil {
				return fmt.Errorf("%s: %w", key, err)
			}
		}
		store, err := f(&v, found)
		if err != nil || !store {
			return err
		}
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if found {
			_, err = kv.Update(ctx, key, b, e.Revision())
		} else {
			_, err = kv.Create(ctx, key, b)
		}
		if err == nil {
			return nil
		}
	}
	return fmt.Errorf("%s: changed under every try", key)
}
