package bus

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/envelope"
)

// Files travel in the NATS Object Store bucket herald_files (its stream
// OBJ_herald_files), never inside an envelope. Each file is a run of
// FileChunk-sized messages, one subject each, under a prefix that names
// who may write it:
//
//	$O.herald_files.C.out.<butler>.<object>.<n>     a butler's file out
//	$O.herald_files.C.in.<butler>.<request_id>.<i>.<n>  attachment i of an inbound message, for butler
//
// so NATS permissions let a butler write only its own files out and read
// only the attachments fetched for it (a direct get by subject), which the
// Object Store's own chunk subjects (a random NUID each) could not. The
// envelope that names a file carries its size and sha256, and the reader
// checks both, so a file that changed or lost a chunk is never sent.
const (
	BucketFiles = "herald_files"
	StreamFiles = "OBJ_" + BucketFiles
	// FileChunk is the size of one chunk message (the Object Store's own).
	FileChunk = 128 << 10
	// FilesAge is how long a file is kept: a delivery waiting out an
	// outage longer than that fails, saying so.
	FilesAge = 24 * time.Hour
	// FilesMaxBytes bounds the bucket unless nats.files_max_bytes says
	// otherwise (docs/reliability.md); a full one refuses a new file, with
	// ErrFilesFull.
	FilesMaxBytes = 2 << 30
)

const filesChunks = "$O." + BucketFiles + ".C."

// FileOutSubject is the prefix of butler's file object.
func FileOutSubject(butler, object string) string {
	return filesChunks + "out." + butler + "." + object
}

// FileInSubject is the prefix of attachment index of inbound message
// requestID, fetched for butler.
func FileInSubject(butler, requestID string, index int) string {
	return filesChunks + "in." + butler + "." + requestID + "." + strconv.Itoa(index)
}

// FileInPrefix is every attachment fetched for butler.
func FileInPrefix(butler string) string { return filesChunks + "in." + butler + "." }

// Held files are attachments that come with the message itself (an
// email's parts, a web chat upload): the receiver that takes the message
// writes each to herald_files at once, under its integration, and names it
// in the attachment's Ref (HeldRef); a download copies it to the butler's
// own prefix as it would a provider's. Kept FilesAge, like every file.

// heldRefPrefix starts a held attachment's Ref: "held:<object>:<sha256>".
const heldRefPrefix = "held:"

// HoldFile writes r, up to max bytes, as a held file of integration, and
// returns the Ref an attachment names it by, with what was written.
func HoldFile(ctx context.Context, js jetstream.JetStream, integration string, r io.Reader, max int64) (string, FileSum, error) {
	object := rand.Text()
	sum, err := PutFile(ctx, js, heldSubject(integration, object), r, max)
	if err != nil {
		return "", sum, err
	}
	return heldRefPrefix + object + ":" + sum.SHA256, sum, nil
}

// Held reports whether an attachment's ref names a held file (else the
// provider holds it, for a deliver.Fetcher).
func Held(ref string) bool { return strings.HasPrefix(ref, heldRefPrefix) }

// GetHeld writes the held file ref of integration, size bytes, to w.
func GetHeld(ctx context.Context, nc *nats.Conn, integration, ref string, size int64, w io.Writer) error {
	object, sum, found := strings.Cut(strings.TrimPrefix(ref, heldRefPrefix), ":")
	if !Held(ref) || !found || object == "" || strings.ContainsAny(object, ".*> ") {
		return fmt.Errorf("%w: attachment ref %q is not a held file's", envelope.ErrValidation, ref)
	}
	return GetFile(ctx, nc, heldSubject(integration, object), size, sum, w)
}

func heldSubject(integration, object string) string {
	return filesChunks + "held." + integration + "." + object
}

// ErrFilesFull is a file refused because herald_files holds FilesMaxBytes.
var ErrFilesFull = errors.New("the file store (herald_files) is full")

// FileSum is what was written of a file: its size, its sha256 (hex) and
// its first 512 bytes, from which its media type is told.
type FileSum struct {
	Size   int64
	SHA256 string
	Head   []byte
}

// PutFile writes r, up to max bytes, as the chunks of subject. More than
// max is an error wrapping envelope.ErrValidation, a full store one
// wrapping ErrFilesFull; what was written of it stays until FilesAge.
func PutFile(ctx context.Context, js jetstream.JetStream, subject string, r io.Reader, max int64) (FileSum, error) {
	var sum FileSum
	h := sha256.New()
	buf := make([]byte, FileChunk)
	for n := 0; ; n++ {
		k, err := io.ReadFull(r, buf)
		if k > 0 {
			if sum.Size+int64(k) > max {
				return sum, fmt.Errorf("%w: the file is over %s", envelope.ErrValidation, Bytes(max))
			}
			if len(sum.Head) < 512 {
				sum.Head = append(sum.Head, buf[:min(k, 512-len(sum.Head))]...)
			}
			h.Write(buf[:k])
			sum.Size += int64(k)
			msg := &nats.Msg{Subject: subject + "." + strconv.Itoa(n), Data: buf[:k], Header: nats.Header{}}
			// A chunk written again (a download asked twice) replaces the last.
			msg.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
			if _, perr := js.PublishMsg(ctx, msg); perr != nil {
				return sum, storeError(perr)
			}
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			return sum, fmt.Errorf("reading the file: %w", err)
		}
	}
	sum.SHA256 = hex.EncodeToString(h.Sum(nil))
	return sum, nil
}

func storeError(err error) error {
	if strings.Contains(err.Error(), "maximum bytes") || strings.Contains(err.Error(), "resource limits") {
		return fmt.Errorf("%w: %w; try again later, or ask the operator to raise nats.files_max_bytes", envelope.ErrOverload, ErrFilesFull)
	}
	return fmt.Errorf("%w: storing the file: %w", envelope.ErrTargetUnavailable, err)
}

// GetFile writes the file of subject to w, size bytes with sha256 sum,
// reading chunk by chunk with direct gets by subject (the only permission
// a reader needs). A chunk missing, or bytes that do not match, is an
// error: nothing of a partial file is to be trusted.
func GetFile(ctx context.Context, nc *nats.Conn, subject string, size int64, sum string, w io.Writer) error {
	h := sha256.New()
	var got int64
	for n := 0; got < size; n++ {
		m, err := nc.RequestWithContext(ctx, "$JS.API.DIRECT.GET."+StreamFiles+"."+subject+"."+strconv.Itoa(n), nil)
		if err != nil {
			return fmt.Errorf("%w: reading the file from %s: %w", envelope.ErrTargetUnavailable, BucketFiles, err)
		}
		if len(m.Data) == 0 && m.Header.Get("Status") != "" {
			if m.Header.Get("Status") == "404" {
				return fmt.Errorf("%w: the file is no longer in %s (files are kept %s)", envelope.ErrNotFound, BucketFiles, FilesAge)
			}
			return fmt.Errorf("%w: reading the file: %s %s", envelope.ErrTargetUnavailable, m.Header.Get("Status"), m.Header.Get("Description"))
		}
		if got+int64(len(m.Data)) > size {
			return fmt.Errorf("%w: the file in %s is longer than the %d bytes named", envelope.ErrInternal, BucketFiles, size)
		}
		h.Write(m.Data)
		got += int64(len(m.Data))
		if _, err := w.Write(m.Data); err != nil {
			return fmt.Errorf("writing the file: %w", err)
		}
	}
	if hex.EncodeToString(h.Sum(nil)) != sum {
		return fmt.Errorf("%w: the file in %s does not match its sha256; it changed after it was named", envelope.ErrInternal, BucketFiles)
	}
	return nil
}

// Bytes writes n bytes as people read them: 512 B, 183 KB, 4.2 MB
// (powers of 1,000, as providers state sizes; a limit set in MiB, such as
// 20 << 20, reads as its round "20 MB"). A provider that did not say is
// "size unknown".
func Bytes(n int64) string {
	switch {
	case n <= 0:
		return "size unknown"
	case n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + " MB"
	case n < 1000:
		return strconv.FormatInt(n, 10) + " B"
	case n < 1_000_000:
		return strconv.FormatInt((n+500)/1000, 10) + " KB"
	}
	return strconv.FormatFloat(float64(n)/1e6, 'f', 1, 64) + " MB"
}

// DownloadPrefix starts a butler's requests for an attachment (core NATS
// request/reply): herald.download.<butler>, answered by a messenger.
const DownloadPrefix = "herald.download."

// DownloadSubject is where butler asks for an attachment.
func DownloadSubject(butler string) string { return DownloadPrefix + butler }

// DownloadRequest asks for attachment Index of inbound message RequestID.
type DownloadRequest struct {
	RequestID string `json:"request_id"`
	Index     int    `json:"index"`
}

// DownloadAnswer is a messenger's answer: the attachment is in
// FileInSubject, or why not.
type DownloadAnswer struct {
	Name   string `json:"name,omitempty"`
	Mime   string `json:"mime,omitempty"`
	Size   int64  `json:"size,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	// Error says why not (it matches its class with errors.Is).
	Error *envelope.ErrorBody `json:"error,omitempty"`
}

// MediaType is what a file's first bytes say it is. The name's or the
// provider's word (claimed) counts only where the bytes say no more than
// "some bytes" or "some text", and never for an image, which the bytes
// always tell.
func MediaType(head []byte, claimed string) string {
	sniffed := http.DetectContentType(head)
	base, _, _ := strings.Cut(sniffed, ";")
	switch {
	case claimed == "", strings.HasPrefix(claimed, "image/"):
		return sniffed
	case base == "application/octet-stream", base == "text/plain":
		return claimed
	case base == "application/ogg" && (strings.HasPrefix(claimed, "audio/") || strings.HasPrefix(claimed, "video/")):
		return claimed
	}
	return sniffed
}
