package web

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

// Files of a conversation, both ways, are held in herald_files under the
// integration (bus.HoldFile): a butler's, since its spooled copy is removed
// once Deliver returns and the page fetches it later; a visitor's, which a
// butler then downloads like any held attachment. The entry keeps each
// file's ref; the page links to the entry's sequence and the file's index,
// and a link serves the file only to a visitor whose conversation (or the
// broadcast) holds that entry. A held file is kept bus.FilesAge; after
// that its link says so.
const (
	// maxFiles is the most files one visitor message carries.
	maxFiles = 10
	// maxUploads bounds the posts with files in flight at once, each of
	// which may hold its connection for uploadTimeout.
	maxUploads = 8
	// uploadTimeout bounds reading one post with files, in place of the
	// server's read timeout: maxFiles large files take a while.
	uploadTimeout = 10 * time.Minute
	// filePolicy is the Content-Security-Policy of a served file: a file a
	// browser renders anyway runs nothing, loads nothing, and gets an
	// origin of its own (sandbox), not the chat's.
	filePolicy = "default-src 'none'; sandbox"
)

// inlineTypes are the files a browser may show rather than download:
// raster images only, never SVG, which can carry script.
var inlineTypes = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true}

// heldFile is a file of a conversation entry, as stored.
type heldFile struct {
	Name string `json:"name"`
	Size int64  `json:"size"`
	Type string `json:"type"`
	Ref  string `json:"ref"`
}

// fileLink is a file as the page gets it: where to fetch it, not its ref.
type fileLink struct {
	Name string `json:"name"`
	Size int64  `json:"size"`
	Type string `json:"type"`
	URL  string `json:"url"`
}

// links are the page's links to the files of s.
func links(s stored) []fileLink {
	var out []fileLink
	for i, f := range s.entry.Files {
		out = append(out, fileLink{Name: f.Name, Size: f.Size, Type: f.Type, URL: fmt.Sprintf("/api/files/%d/%d", s.seq, i)})
	}
	return out
}

// hold keeps a delivery's files in herald_files, in order.
func (c *Channel) hold(ctx context.Context, files []deliver.File) ([]heldFile, error) {
	if len(files) == 0 {
		return nil, nil
	}
	if c.js == nil {
		return nil, fmt.Errorf("%w: web:%s runs without a bus, so it keeps no files; send the text alone", envelope.ErrValidation, c.id)
	}
	out := make([]heldFile, 0, len(files))
	for _, f := range files {
		ref, err := c.holdSpooled(ctx, f)
		if err != nil {
			return nil, err
		}
		out = append(out, heldFile{Name: f.Name, Size: f.Size, Type: f.MediaType, Ref: ref})
	}
	return out, nil
}

func (c *Channel) holdSpooled(ctx context.Context, f deliver.File) (string, error) {
	r, err := os.Open(f.Path)
	if err != nil {
		return "", fmt.Errorf("%w: opening file %s: %w", envelope.ErrInternal, f.Name, err)
	}
	defer r.Close()
	// The spool was checked against Size: no more is read.
	ref, _, err := bus.HoldFile(ctx, c.js, c.id, r, f.Size)
	if err != nil {
		return "", fmt.Errorf("keeping file %s for the web chat: %w", f.Name, err)
	}
	return ref, nil
}

// refusal is a request the handler answers with code and a sentence.
type refusal struct {
	code   int
	reason string
}

func (r *refusal) Error() string { return r.reason }

func refuse(code int, format string, a ...any) error {
	return &refusal{code: code, reason: fmt.Sprintf(format, a...)}
}

// readUpload reads a post with files (multipart/form-data): first the
// "message" part, the JSON of a post whose text may be empty, then up to
// maxFiles "file" parts, each held as it arrives and never past the
// channel's largest file. Errors are refusals.
func (h *handler) readUpload(w http.ResponseWriter, r *http.Request) (post, []heldFile, error) {
	if h.c.maxFile == 0 { // no bus to keep them in
		return post{}, nil, refuse(http.StatusBadRequest, "this chat takes no files; send the text alone")
	}
	select {
	case h.uploads <- struct{}{}:
		defer func() { <-h.uploads }()
	default:
		return post{}, nil, refuse(http.StatusServiceUnavailable, "too many files are being sent right now; the page retries")
	}
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(uploadTimeout))
	_ = rc.SetWriteDeadline(time.Now().Add(uploadTimeout + h.c.timeouts.write))
	mr, err := r.MultipartReader()
	if err != nil {
		return post{}, nil, refuse(http.StatusBadRequest, "the body is not multipart/form-data: %v", err)
	}
	part, err := mr.NextPart()
	if err != nil {
		return post{}, nil, bodyRefusal(err)
	}
	if part.FormName() != "message" {
		return post{}, nil, refuse(http.StatusBadRequest, "the first part must be the message (JSON, named message)")
	}
	p, err := decodePost(io.LimitReader(part, maxBody), true)
	if err != nil {
		return post{}, nil, refuse(http.StatusBadRequest, "%s", err)
	}
	var files []heldFile
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return post{}, nil, bodyRefusal(err)
		}
		if len(files) == maxFiles {
			return post{}, nil, refuse(http.StatusRequestEntityTooLarge, "a message carries at most %d files; send the rest in another", maxFiles)
		}
		f, err := h.holdPart(r.Context(), part)
		if err != nil {
			return post{}, nil, err
		}
		files = append(files, f)
	}
	if len(files) == 0 && strings.TrimSpace(p.Text) == "" {
		return post{}, nil, refuse(http.StatusBadRequest, "the message is empty")
	}
	return p, files, nil
}

// holdPart keeps one file part in herald_files; what the bytes say it is
// counts over what the browser claimed.
func (h *handler) holdPart(ctx context.Context, part *multipart.Part) (heldFile, error) {
	name := fileName(part.FileName())
	if part.FormName() != "file" || name == "" {
		return heldFile{}, refuse(http.StatusBadRequest, "each part after the message must be a file, named file, with a filename")
	}
	ref, sum, err := bus.HoldFile(ctx, h.c.js, h.c.id, part, h.c.maxFile)
	if _, tooBig := errors.AsType[*http.MaxBytesError](err); tooBig {
		return heldFile{}, bodyRefusal(err)
	}
	switch {
	case errors.Is(err, envelope.ErrValidation):
		return heldFile{}, refuse(http.StatusRequestEntityTooLarge, "%s is over %s, the most one file may be here", name, bus.Bytes(h.c.maxFile))
	case errors.Is(err, bus.ErrFilesFull):
		h.c.log.Warn("web upload not kept: the file store is full", "err", err)
		return heldFile{}, refuse(http.StatusServiceUnavailable, "not sent: Herald's file store is full; the page retries")
	case errors.Is(err, envelope.ErrTargetUnavailable):
		h.c.log.Warn("web upload not kept; the page retries", "err", err)
		return heldFile{}, refuse(http.StatusServiceUnavailable, "not sent: Herald cannot store files right now")
	case err != nil:
		return heldFile{}, refuse(http.StatusBadRequest, "%s could not be read: %v", name, err)
	}
	return heldFile{Name: name, Size: sum.Size, Type: bus.MediaType(sum.Head, claimedType(part.Header.Get("Content-Type"))), Ref: ref}, nil
}

// bodyRefusal is the answer to a body that could not be read.
func bodyRefusal(err error) error {
	if e, tooBig := errors.AsType[*http.MaxBytesError](err); tooBig {
		return refuse(http.StatusRequestEntityTooLarge, "the message with its files is over %s, the most one may carry", bus.Bytes(e.Limit))
	}
	return refuse(http.StatusBadRequest, "the body could not be read: %v", err)
}

// fileName is a file's name as it may be shown and sent on: valid UTF-8,
// no control characters, at most 255 characters.
func fileName(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, s)
	s = strings.TrimSpace(s)
	for utf8.RuneCountInString(s) > 255 {
		_, n := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-n]
	}
	return s
}

// claimedType is the media type a browser gave a file part, without its
// parameters, or "" if it gave none that parses.
func claimedType(v string) string {
	mt, _, err := mime.ParseMediaType(v)
	if err != nil || len(mt) > 255 {
		return ""
	}
	return mt
}

// attachments are a visitor's files as the ingress names them.
func attachments(files []heldFile) []envelope.Attachment {
	var out []envelope.Attachment
	for _, f := range files {
		out = append(out, envelope.Attachment{Name: f.Name, Mime: f.Type, Size: f.Size, Ref: f.Ref})
	}
	return out
}

// file serves file {index} of the entry at stream sequence {seq} to the
// visitor whose conversation holds it. A visitor it is not for, no
// cookie, no such entry or file: the same 404, so a link tells nobody
// else even that it exists.
func (h *handler) file(w http.ResponseWriter, r *http.Request) {
	f, err := h.lookupFile(r)
	if err != nil {
		var ref *refusal
		if !errors.As(err, &ref) {
			ref = &refusal{code: http.StatusServiceUnavailable, reason: "This file cannot be read right now; try again in a moment."}
			h.c.log.Warn("web file link not served", "err", err)
		}
		failText(w, ref.code, ref.reason)
		return
	}
	ans := &fileAnswer{w: w, rc: http.NewResponseController(w), f: f, timeout: h.c.timeouts.write}
	if r.Method == http.MethodHead {
		ans.start()
		return
	}
	err = bus.GetHeld(r.Context(), h.c.nc, h.c.id, f.Ref, f.Size, ans)
	switch {
	case err == nil:
		ans.start() // an empty file wrote nothing
	case ans.started:
		// Too late for a sentence: the answer falls short of its
		// Content-Length, which the browser reports as a failed download.
		h.c.log.Warn("web file link cut short", "err", err)
	case errors.Is(err, envelope.ErrNotFound):
		failText(w, http.StatusGone, fmt.Sprintf("%s is no longer kept: Herald keeps files %s. Ask for it again.", f.Name, hours(bus.FilesAge)))
	default:
		h.c.log.Warn("web file link not served", "err", err)
		failText(w, http.StatusServiceUnavailable, "This file cannot be read right now; try again in a moment.")
	}
}

// lookupFile finds the file a link names in the requesting visitor's
// conversation; a refusal when it is not there.
func (h *handler) lookupFile(r *http.Request) (heldFile, error) {
	notFound := refuse(http.StatusNotFound, "There is no such file in your conversation.")
	visitor, ok := h.visitor(nil, r, false)
	seq, err1 := strconv.ParseUint(r.PathValue("seq"), 10, 64)
	index, err2 := strconv.Atoi(r.PathValue("index"))
	if !ok || h.c.nc == nil || err1 != nil || err2 != nil || index < 0 {
		return heldFile{}, notFound
	}
	st, found, err := h.c.store.get(r.Context(), seq)
	if err != nil {
		return heldFile{}, err
	}
	if !found || (st.subject != Subject(h.c.id, visitor) && st.subject != Subject(h.c.id, Broadcast)) || index >= len(st.entry.Files) {
		return heldFile{}, notFound
	}
	return st.entry.Files[index], nil
}

// fileAnswer writes a file's headers with its first bytes, so that a file
// found gone before any is still answered with a sentence. Each write gets
// a deadline of its own, as an event stream's: a large file may take its
// time, a reader that stops lets go.
type fileAnswer struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	f       heldFile
	timeout time.Duration
	started bool
}

func (a *fileAnswer) Write(p []byte) (int, error) {
	a.start()
	_ = a.rc.SetWriteDeadline(time.Now().Add(a.timeout))
	return a.w.Write(p)
}

// start writes the headers: the file's type, and a disposition that makes
// the browser download it, or show it where it is a raster image. The
// guard's nosniff keeps the browser to that type.
func (a *fileAnswer) start() {
	if a.started {
		return
	}
	a.started = true
	typ, _, err := mime.ParseMediaType(a.f.Type)
	if err != nil {
		typ, a.f.Type = "application/octet-stream", "application/octet-stream"
	}
	disposition := "attachment"
	if inlineTypes[typ] {
		disposition = "inline"
	}
	hdr := a.w.Header()
	hdr.Set("Content-Security-Policy", filePolicy)
	hdr.Set("Content-Type", a.f.Type)
	if d := mime.FormatMediaType(disposition, map[string]string{"filename": a.f.Name}); d != "" {
		disposition = d
	}
	hdr.Set("Content-Disposition", disposition)
	hdr.Set("Content-Length", strconv.FormatInt(a.f.Size, 10))
	hdr.Set("Cache-Control", "private, no-store")
	a.w.WriteHeader(http.StatusOK)
}

// failText answers a file link with a sentence: the person opened it in
// the browser, so it is text, not the API's JSON.
func failText(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, msg+"\n")
}

func hours(d time.Duration) string { return strconv.Itoa(int(d.Hours())) + " hours" }
