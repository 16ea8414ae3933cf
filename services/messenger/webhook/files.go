package webhook

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

// A webhook with files is one multipart/form-data POST: the JSON payload
// as the part "payload", then each file as the part "files[<i>]". The JSON
// names each file's part, size and sha256, so a receiver can check what it
// got; the signature covers the whole body, as it covers the JSON alone.

// PayloadPart is the name of the JSON part of a multipart webhook.
const PayloadPart = "payload"

// filePart describes one file of a multipart webhook in its JSON.
type filePart struct {
	Name      string `json:"name"`
	Size      int64  `json:"size"`
	MediaType string `json:"media_type"`
	SHA256    string `json:"sha256"`
	Part      string `json:"part"`
}

// fileParts describes files for the JSON; nil without any, so that a
// webhook without files is what it always was.
func fileParts(files []deliver.File) []filePart {
	var out []filePart
	for i, f := range files {
		out = append(out, filePart{Name: f.Name, Size: f.Size, MediaType: partType(f.MediaType), SHA256: f.SHA256, Part: partName(i)})
	}
	return out
}

// partName is the form name of file i.
func partName(i int) string { return "files[" + strconv.Itoa(i) + "]" }

// partType is a file's media type as its part's Content-Type: re-encoded,
// so that nothing in it can break the part's header.
func partType(t string) string {
	if mt, params, err := mime.ParseMediaType(t); err == nil {
		if v := mime.FormatMediaType(mt, params); v != "" {
			return v
		}
	}
	return "application/octet-stream"
}

// signedBody is a webhook's body, signed, that the transport can read as
// often as it needs: the JSON in memory, or a multipart body in a temp
// file.
type signedBody struct {
	data        io.ReaderAt
	size        int64
	contentType string
	signature   string
	files       int
	close       func() // removes the temp file
}

// newBody is the signed body of a webhook of payload js and files.
func (s *sender) newBody(id string, now time.Time, js []byte, files []deliver.File) (*signedBody, error) {
	if len(files) == 0 {
		return &signedBody{data: bytes.NewReader(js), size: int64(len(js)), contentType: "application/json",
			signature: s.secrets.sign(id, now, js), close: func() {}}, nil
	}
	// The signature header goes before the body, so the body is written
	// whole first: to disk (files may be 50 MB each), signed as it goes.
	tmp, err := os.CreateTemp("", "herald-webhook-*") // 0600
	if err != nil {
		return nil, fmt.Errorf("%w: creating the webhook's body: %w", envelope.ErrInternal, err)
	}
	done := func() {
		_ = tmp.Close()
		_ = os.Remove(tmp.Name())
	}
	sig := s.secrets.signer(id, now)
	boundary := boundaryOf(js)
	if err := writeMultipart(io.MultiWriter(tmp, sig), boundary, js, files); err != nil {
		done()
		return nil, err
	}
	size, err := tmp.Seek(0, io.SeekCurrent)
	if err != nil {
		done()
		return nil, writing(err)
	}
	return &signedBody{data: tmp, size: size, contentType: "multipart/form-data; boundary=" + boundary,
		signature: sig.header(), files: len(files), close: done}, nil
}

// boundaryOf is the multipart boundary of a webhook of payload js: a hash
// of it, so every attempt sends the same bytes (a receiver deduplicating
// on webhook-id compares them), and, since js names each file's sha256,
// not a string that any of its parts could hold.
func boundaryOf(js []byte) string {
	sum := sha256.Sum256(js)
	return "herald-" + hex.EncodeToString(sum[:16])
}

// writeMultipart writes the multipart body to w: the JSON, then each file
// from its spooled copy.
func writeMultipart(w io.Writer, boundary string, js []byte, files []deliver.File) error {
	mw := multipart.NewWriter(w)
	if err := mw.SetBoundary(boundary); err != nil {
		return writing(err)
	}
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", `form-data; name="`+PayloadPart+`"`)
	h.Set("Content-Type", "application/json")
	p, err := mw.CreatePart(h)
	if err == nil {
		_, err = p.Write(js)
	}
	if err != nil {
		return writing(err)
	}
	for i, f := range files {
		if err := writeFile(mw, partName(i), f); err != nil {
			return err
		}
	}
	if err := mw.Close(); err != nil {
		return writing(err)
	}
	return nil
}

// writing is the error of a body that could not be written (the temp
// file's disk is full, the spooled copy is gone).
func writing(err error) error {
	return fmt.Errorf("%w: writing the webhook's body: %w", envelope.ErrInternal, err)
}

// writeFile writes f as the part name, checking that its bytes are still
// those the JSON describes: a receiver that checks would refuse them, for
// no fault of its own.
func writeFile(mw *multipart.Writer, name string, f deliver.File) error {
	if strings.ContainsFunc(f.Name, unicode.IsControl) {
		return fmt.Errorf("%w: file name %q has control characters", envelope.ErrValidation, f.Name)
	}
	in, err := os.Open(f.Path)
	if err != nil {
		return fmt.Errorf("%w: file %s: %w", envelope.ErrInternal, f.Name, err)
	}
	defer in.Close()
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", multipart.FileContentDisposition(name, f.Name))
	h.Set("Content-Type", partType(f.MediaType))
	p, err := mw.CreatePart(h)
	if err != nil {
		return writing(err)
	}
	sum := sha256.New()
	n, err := io.Copy(io.MultiWriter(p, sum), in)
	if err != nil {
		return writing(fmt.Errorf("file %s: %w", f.Name, err))
	}
	if n != f.Size || hex.EncodeToString(sum.Sum(nil)) != f.SHA256 {
		return fmt.Errorf("%w: file %s changed since it was checked (%s, want %s with sha256 %s)", envelope.ErrInternal, f.Name, bus.Bytes(n), bus.Bytes(f.Size), f.SHA256)
	}
	return nil
}

// request is the POST of b to u, with its Content-Type and signature.
func (b *signedBody) request(ctx context.Context, u *url.URL) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), nil)
	if err != nil {
		return nil, err
	}
	// GetBody lets net/http send it again on a fresh connection when the
	// first try cannot have been taken, as it does for the JSON alone.
	req.GetBody = func() (io.ReadCloser, error) {
		return io.NopCloser(io.NewSectionReader(b.data, 0, b.size)), nil
	}
	req.Body, _ = req.GetBody()
	req.ContentLength = b.size
	req.Header.Set("Content-Type", b.contentType)
	req.Header.Set(HeaderSignature, b.signature)
	return req, nil
}

// tooLarge is the sentence of a 413: how big the webhook was and the limit
// its files were held to, so it is clear which side to change.
func tooLarge(dest, status string, b *signedBody) string {
	if b.files == 0 {
		return fmt.Sprintf("%s refused the webhook as too large (%s): its JSON body was %s; raise the receiver's limit on request bodies",
			dest, status, bus.Bytes(b.size))
	}
	files := "1 file"
	if b.files > 1 {
		files = strconv.Itoa(b.files) + " files"
	}
	ch, _ := config.ChannelOf("webhook")
	return fmt.Sprintf("%s refused the webhook as too large (%s): its body, with %s, was %s (Herald's webhooks carry files of up to %s each); raise the receiver's limit on request bodies, or send fewer or smaller files",
		dest, status, files, bus.Bytes(b.size), bus.Bytes(ch.MaxFile))
}
