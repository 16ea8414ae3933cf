package email

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"mime/multipart"
	"net/textproto"
	"os"
	"strconv"
	"strings"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

// Files out: a delivery's files go in its mail, each a part of its
// multipart/mixed after the text, in base64 read from the spooled copy as
// the mail is written. Files in: a mail's attachments are held in
// herald_files as they are decoded (holder).

// lineLength is a base64 line's length (RFC 2045 §6.8). paramLength is how
// long a file part's Content-Type or Content-Disposition may be on one line
// (RFC 5322's 78, less the longer name); past it, the file's name goes in
// RFC 2231 continuations of at most segmentLength, so that their lines
// (" filename*12*=" and the piece) stay within 78 too.
const (
	lineLength    = 76
	paramLength   = 78 - len("Content-Disposition: ")
	segmentLength = 56
)

// writeFile writes f as a part of mw: its media type and name, and its
// bytes in base64 lines, read from f.Path as they go. An error reading the
// file wraps envelope.ErrInternal (the mail must then not be ended).
func writeFile(mw *multipart.Writer, f deliver.File) error {
	p, err := mw.CreatePart(fileHeader(f))
	if err != nil {
		return err
	}
	r, err := os.Open(f.Path)
	if err != nil {
		return fmt.Errorf("%w: file %s: %w", envelope.ErrInternal, f.Name, err)
	}
	defer r.Close()
	enc := base64.NewEncoder(base64.StdEncoding, &lines{w: p})
	if _, err := io.Copy(enc, fileReader{r, f.Name}); err != nil {
		return err
	}
	return enc.Close()
}

// fileHeader is the header of f's part. The name goes in Content-Type's
// name too, which older clients read instead of the disposition's.
func fileHeader(f deliver.File) textproto.MIMEHeader {
	name := clean(f.Name)
	if name == "" {
		name = "file"
	}
	typ, params, err := mime.ParseMediaType(f.MediaType)
	if err != nil && !errors.Is(err, mime.ErrInvalidMediaParameter) || mime.FormatMediaType(typ, params) == "" {
		typ, params = "application/octet-stream", nil
	}
	return textproto.MIMEHeader{
		"Content-Type":              {withParam(typ, params, "name", name)},
		"Content-Disposition":       {withParam("attachment", nil, "filename", name)},
		"Content-Transfer-Encoding": {"base64"},
	}
}

// withParam formats typ with params and attr=value: on one line where it
// fits, else with value in RFC 2231 continuations (attr*0*, attr*1*, ...
// in UTF-8), a line each, so that no name, however long or far from ASCII,
// makes a line past RFC 5322's limits.
func withParam(typ string, params map[string]string, attr, value string) string {
	all := maps.Clone(params)
	if all == nil {
		all = map[string]string{}
	}
	all[attr] = value
	if s := mime.FormatMediaType(typ, all); s != "" && len(s) <= paramLength {
		return s
	}
	var b strings.Builder
	b.WriteString(mime.FormatMediaType(typ, params))
	for i, seg := range segments(value, segmentLength) {
		b.WriteString(";\r\n " + attr + "*" + strconv.Itoa(i) + "*=" + seg)
	}
	return b.String()
}

// segments percent-encodes value as RFC 2231 does (every byte outside its
// attribute-char as %XX, the first segment starting with its charset) in
// pieces of at most n characters, never cutting a character: clients that
// decode each piece apart still read the name whole.
func segments(value string, n int) []string {
	out := []string{"utf-8''"}
	for _, r := range value {
		enc := string(r)
		if !attrChar(r) {
			enc = ""
			for _, c := range []byte(string(r)) {
				enc += fmt.Sprintf("%%%02X", c)
			}
		}
		if last := len(out) - 1; len(out[last])+len(enc) > n {
			out = append(out, enc)
		} else {
			out[last] += enc
		}
	}
	return out
}

func attrChar(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r < 0x80 && strings.ContainsRune("!#$&+-.^_`|~", r)
}

// lines breaks what is written to w into lines of lineLength characters,
// with CRLF between them (the boundary that follows a part brings its own).
type lines struct {
	w   io.Writer
	col int
}

func (l *lines) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		if l.col == lineLength {
			if _, err := io.WriteString(l.w, "\r\n"); err != nil {
				return n, err
			}
			l.col = 0
		}
		k := min(len(p), lineLength-l.col)
		if _, err := l.w.Write(p[:k]); err != nil {
			return n, err
		}
		l.col += k
		n += k
		p = p[k:]
	}
	return n, nil
}

// fileReader tells a file's read errors from the connection's write errors
// as a part is copied: those are Herald's (envelope.ErrInternal).
type fileReader struct {
	r    io.Reader
	name string
}

func (f fileReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		err = fmt.Errorf("%w: reading file %s: %w", envelope.ErrInternal, f.name, err)
	}
	return n, err
}

// holder keeps each attachment of mail id in herald_files under the
// integration, as its part is decoded, bounded by inbound.max_bytes. One
// that cannot be kept (the store full, no store at all) is left out of the
// attachments and noted in the mail's text, rather than the mail refused:
// the person's words arrive, and the butler can ask for the file again.
// (With the store down, the ingress most likely fails too, and its 451 has
// the mail sent again.) Only the first maxAttachments are kept; ingress.v1
// lists no more.
func (r *Receiver) holder(ctx context.Context, id string) holdFunc {
	n := 0
	return func(a *attachment, body io.Reader) {
		n++
		if r.js == nil || n > maxAttachments {
			a.size, _ = io.Copy(io.Discard, body)
			a.lost = "this messenger has no file store"
			if n > maxAttachments {
				a.lost = "too many attachments"
			}
			return
		}
		ref, sum, err := bus.HoldFile(ctx, r.js, r.id, body, r.maxBytes)
		if err != nil {
			rest, _ := io.Copy(io.Discard, body)
			a.size, a.lost = sum.Size+rest, "it could not be stored just now"
			if errors.Is(err, bus.ErrFilesFull) {
				a.lost = "the file store is full"
			}
			r.log.WarnContext(ctx, "inbound mail attachment not kept", "message_id", id, "index", a.index, "err", err)
			return
		}
		a.ref, a.size, a.mime = ref, sum.Size, bus.MediaType(sum.Head, a.mime)
	}
}
