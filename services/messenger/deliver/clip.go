package deliver

import (
	"unicode/utf8"

	"github.com/heraldhq/herald/pkg/envelope"
)

// Limits of ingress.v1 on what a receiver hands on, in bytes. Providers'
// own are lower, so these only keep a broken or hostile provider from
// producing an envelope the bus refuses.
const (
	// MaxMeta is how long one meta value of a received message may be;
	// longer ones are cut (ClipMeta).
	MaxMeta     = 4096
	MaxText     = 262144 // content.text
	MaxFiles    = 64     // content.attachments
	MaxFileName = 512    // an attachment's name
	MaxMime     = 255    // an attachment's mime type
	MaxRef      = 2048   // an attachment's ref
	MaxNativeID = 998    // native_id
)

// Clip cuts text to at most n bytes, at a character boundary.
func Clip(text string, n int) string {
	if len(text) <= n {
		return text
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(text[cut]) {
		cut--
	}
	return text[:cut]
}

// ClipMeta cuts each value of meta to MaxMeta bytes, in place, and returns
// meta.
func ClipMeta(meta map[string]string) map[string]string {
	for k, v := range meta {
		meta[k] = Clip(v, MaxMeta)
	}
	return meta
}

// Attachment describes a received file without its content, clipped to
// ingress.v1's limits: a file the provider named no name or type of is
// "file" of application/octet-stream, and a negative size is 0.
func Attachment(name, mime string, size int64, ref string) envelope.Attachment {
	if name == "" {
		name = "file"
	}
	if mime == "" {
		mime = "application/octet-stream"
	}
	return envelope.Attachment{Name: Clip(name, MaxFileName), Mime: Clip(mime, MaxMime), Size: max(size, 0), Ref: Clip(ref, MaxRef)}
}
