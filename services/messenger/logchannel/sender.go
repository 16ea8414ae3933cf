// Package logchannel is the `log` channel (architecture.md §7): each notify becomes one
// structured record on the logger named llm_notify. It needs no account, so a
// fresh `herald dev` can deliver somewhere at once.
package logchannel

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

// LoggerName is the `logger` attribute of every record.
const LoggerName = "llm_notify"

// Sender writes notifications to a logger.
type Sender struct {
	log *slog.Logger
	seq atomic.Uint64
}

// New is the channel's deliver.Factory.
func New(in config.Integration, env deliver.Env) (deliver.Sender, error) {
	log := env.Log()
	return &Sender{log: log.With("logger", LoggerName, "integration", in.ID)}, nil
}

// Deliver logs d: low and normal urgency at INFO, high at WARN.
func (s *Sender) Deliver(ctx context.Context, d deliver.Delivery) (deliver.Receipt, error) {
	if d.Intent == envelope.IntentReact {
		return deliver.Receipt{}, fmt.Errorf("%w: the log channel cannot react; use reply or send", envelope.ErrValidation)
	}
	if len(d.Done) > 0 {
		return deliver.Receipt{MessageIDs: d.Done}, nil
	}
	if err := ctx.Err(); err != nil {
		return deliver.Receipt{}, fmt.Errorf("%w: %w", envelope.ErrTimeout, err)
	}
	level := slog.LevelInfo
	switch {
	case d.Level == "error":
		level = slog.LevelError
	case d.Level == "warn", d.Level == "" && d.Urgency == "high":
		level = slog.LevelWarn
	}
	id := fmt.Sprintf("log-%d-%d", time.Now().UnixMilli(), s.seq.Add(1))
	attrs := []slog.Attr{
		slog.String("butler", d.Butler),
		slog.String("intent", d.Intent),
		slog.String("urgency", d.Urgency),
		slog.String("message_id", id),
		slog.String("message", Escape(d.Message)),
	}
	for k, v := range map[string]string{"recipient": d.Recipient, "subject": d.Subject, "topic": d.Topic, "context": d.Topic, "thread": d.Thread} {
		if v != "" {
			attrs = append(attrs, slog.String(k, Escape(v)))
		}
	}
	if err := d.Calling(); err != nil {
		return deliver.Receipt{}, err
	}
	s.log.LogAttrs(ctx, level, "notification", attrs...)
	// Its files: a line each, with what identifies the bytes (never the
	// bytes themselves).
	for _, f := range d.Files {
		s.log.LogAttrs(ctx, level, "file", slog.String("butler", d.Butler), slog.String("message_id", id),
			slog.String("name", Escape(f.Name)), slog.Int64("size", f.Size), slog.String("media_type", Escape(f.MediaType)), slog.String("sha256", f.SHA256))
	}
	return d.SentOne(id, "log record")
}

// Escape makes control characters visible (\n, \t, \u001b, ...), so a message
// can never start a forged log line or drive a terminal.
func Escape(s string) string {
	start := -1
	for i, r := range s {
		if needsEscape(r) {
			start = i
			break
		}
	}
	if start < 0 {
		return s // the common case: nothing to escape, nothing to copy
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:start])
	for _, r := range s[start:] {
		switch {
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\\':
			b.WriteString(`\\`)
		case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f, r == 0x2028, r == 0x2029:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// needsEscape reports whether Escape writes r as something else (a byte
// that is not UTF-8 comes as RuneError and is written as U+FFFD).
func needsEscape(r rune) bool {
	return r == '\\' || r == utf8.RuneError || r < 0x20 || r == 0x7f || r >= 0x80 && r <= 0x9f || r == 0x2028 || r == 0x2029
}

func init() {
	deliver.Register(deliver.Channel{Type: "log", New: New})
}
