package discord

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

// Discord's limits on the files a bot sends and fetches.
const (
	// MaxFiles is how many files one message carries.
	MaxFiles = 10
	// MaxFileUnboosted is the largest file a server without boosts takes,
	// and a direct message; boosts raise it (50 MB at level 2, 100 MB at
	// level 3). Herald sends files of up to 25 MB (pkg/channel/discord), so Discord's
	// 413 is what tells a server's own limit.
	MaxFileUnboosted = 10 << 20
	// maxDownload bounds a download whose size Discord did not announce:
	// its largest upload (500 MB, with Nitro).
	maxDownload = 500 << 20
	// transferTimeout bounds one call carrying files, and one download.
	transferTimeout = 10 * time.Minute
)

// cdnHosts are where Discord serves attachments.
var cdnHosts = []string{"cdn.discordapp.com", "media.discordapp.net"}

// attachment names one file part of a message, files[ID], and the name
// Discord shows it by.
type attachment struct {
	ID       int    `json:"id"`
	Filename string `json:"filename"`
}

// upload is a request carrying files: payload as payload_json, and a part
// files[n] per file, as multipart/form-data.
type upload struct {
	payload any
	files   []deliver.File
}

// withFiles is body as the upload of its files, each named in its
// attachments.
func withFiles(body createMessage) *upload {
	for i, f := range body.files {
		body.Attachments = append(body.Attachments, attachment{ID: i, Filename: f.Name})
	}
	return &upload{payload: body, files: body.files}
}

// formBody is an upload as it goes out: the parts' headers made up front
// and each file streamed from its spooled copy after its header, so that
// its length is known (no chunked request) and no file is ever whole in
// memory. Closing it closes the files.
type formBody struct {
	io.Reader
	files       []*os.File
	size        int64
	contentType string
}

func (f *formBody) Close() error {
	for _, r := range f.files {
		_ = r.Close() // read only: closing loses nothing
	}
	return nil
}

// open builds u's body, opening its files: anew for each try, as a 429
// waited out sends the call again.
func (u *upload) open() (*formBody, error) {
	payload, err := json.Marshal(u.payload)
	if err != nil {
		return nil, fmt.Errorf("%w: encoding a Discord message: %w", envelope.ErrInternal, err)
	}
	f := &formBody{}
	var (
		buf   bytes.Buffer
		parts []io.Reader
	)
	cut := func() { // what the writer wrote so far becomes a part of the body
		b := bytes.Clone(buf.Bytes())
		buf.Reset()
		parts = append(parts, bytes.NewReader(b))
		f.size += int64(len(b))
	}
	// The writer writes to buf, which takes everything: no error to check.
	mw := multipart.NewWriter(&buf)
	pw, _ := mw.CreatePart(textproto.MIMEHeader{"Content-Disposition": {`form-data; name="payload_json"`}, "Content-Type": {"application/json"}})
	_, _ = pw.Write(payload)
	for i, file := range u.files {
		r, size, err := openFile(file)
		if err != nil {
			_ = f.Close()
			return nil, err
		}
		f.files = append(f.files, r)
		_, _ = mw.CreatePart(textproto.MIMEHeader{
			"Content-Disposition": {multipart.FileContentDisposition("files["+strconv.Itoa(i)+"]", headerSafe(file.Name))},
			"Content-Type":        {mediaType(file.MediaType)},
		})
		cut()
		parts = append(parts, io.LimitReader(r, size))
		f.size += size
	}
	_ = mw.Close()
	cut()
	f.Reader, f.contentType = io.MultiReader(parts...), mw.FormDataContentType()
	return f, nil
}

// openFile opens a delivery's spooled file, with its size.
func openFile(file deliver.File) (*os.File, int64, error) {
	r, err := os.Open(file.Path)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: file %s: %w", envelope.ErrInternal, file.Name, err)
	}
	info, err := r.Stat()
	if err != nil {
		_ = r.Close()
		return nil, 0, fmt.Errorf("%w: file %s: %w", envelope.ErrInternal, file.Name, err)
	}
	return r, info.Size(), nil
}

// headerSafe is name as a part's header can carry it: control characters
// would end the header line. The name Discord shows is the payload's.
func headerSafe(name string) string {
	return strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return '_'
		}
		return r
	}, name)
}

// mediaType is a file's Content-Type: its media type, re-written so that
// nothing but a media type reaches the header; application/octet-stream
// for none.
func mediaType(t string) string {
	typ, params, err := mime.ParseMediaType(t)
	if err != nil {
		return "application/octet-stream"
	}
	if s := mime.FormatMediaType(typ, params); s != "" {
		return s
	}
	return "application/octet-stream"
}

// Fetch writes the file of attachment a (deliver.Fetcher) from Discord's
// CDN, at the link its ref holds (ingress.go). The link is signed and
// needs no token, so none is sent: the token is for the REST API alone. A
// link expired (Discord's last about a day) is asked for anew, with the
// message the file came with.
func (s *sender) Fetch(ctx context.Context, a envelope.Attachment, w io.Writer) error {
	link, from, err := s.parseRef(a.Ref)
	if err != nil {
		return err
	}
	if a.Size > maxDownload {
		return fmt.Errorf("%w: %s is %s, and Discord hands out files of up to %s", envelope.ErrValidation, a.Name, bus.Bytes(a.Size), bus.Bytes(maxDownload))
	}
	err = s.download(ctx, link, a, w)
	if errors.Is(err, errExpired) && from.message != "" {
		if link, err = s.freshLink(ctx, from, a); err != nil {
			return err
		}
		err = s.download(ctx, link, a, w)
	}
	if errors.Is(err, errExpired) {
		return fmt.Errorf("%w: Discord no longer serves %s: its links expire after about a day, or the file was deleted; ask the person to send it again",
			envelope.ErrNotFound, a.Name)
	}
	return err
}

// origin is the message an attachment came with, which the fragment of
// its ref names ("#<channel>:<message>:<attachment>"; a fragment is never
// sent to the CDN).
type origin struct {
	channel, message, attachment string
}

// parseRef reads an attachment's ref: its link, and where it came from
// (origin{} if the ref does not say).
func (s *sender) parseRef(ref string) (*url.URL, origin, error) {
	u, err := url.Parse(ref)
	if err != nil || !s.fromDiscord(u) {
		host := ""
		if err == nil {
			host = " (host " + u.Host + ")"
		}
		return nil, origin{}, fmt.Errorf("%w: attachment %.40q%s is not a link to Discord's CDN (%s), the only place Herald fetches Discord files from",
			envelope.ErrValidation, ref, host, strings.Join(cdnHosts, ", "))
	}
	var o origin
	if p := strings.Split(u.Fragment, ":"); len(p) == 3 && snowflakePattern.MatchString(p[0]) && snowflakePattern.MatchString(p[1]) && snowflakePattern.MatchString(p[2]) {
		o = origin{channel: p[0], message: p[1], attachment: p[2]}
	}
	u.Fragment, u.RawFragment = "", ""
	return u, o, nil
}

// fromDiscord reports whether u is a link Herald may download: https on
// Discord's CDN, or on the host of api_url (a fake in tests, a proxy in
// front of Discord). Nothing else: the ref comes back through the bus,
// where a butler names the file to fetch, and were any URL taken, whoever
// can write a ref could make the messenger GET any address inside its
// network (a cloud metadata service, an admin page) and hand the answer
// to a butler (SSRF). No redirect is followed either (deliver.NewClient),
// so the CDN cannot send the request elsewhere.
func (s *sender) fromDiscord(u *url.URL) bool {
	if u.User != nil || u.Opaque != "" || u.Host == "" {
		return false
	}
	if u.Scheme == "https" && slices.Contains(cdnHosts, strings.ToLower(u.Hostname())) && (u.Port() == "" || u.Port() == "443") {
		return true
	}
	api, err := url.Parse(s.api.base)
	return err == nil && u.Scheme == api.Scheme && strings.EqualFold(u.Host, api.Host)
}

// errExpired is a link the CDN no longer serves (404, 403, 410): it
// expired, or its file was deleted.
var errExpired = errors.New("the CDN no longer serves the link")

// download copies the file at link to w, as it comes: at most the size
// Discord announced for it.
func (s *sender) download(ctx context.Context, link *url.URL, a envelope.Attachment, w io.Writer) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, link.String(), nil)
	if err != nil {
		return fmt.Errorf("%w: the link of %s: %s", envelope.ErrInternal, a.Name, s.api.scrub(err.Error()))
	}
	req.Header.Set("User-Agent", userAgent) // no Authorization: see Fetch
	resp, err := s.api.transfer.Do(req)
	if err != nil {
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err // its text starts with the signed link
		}
		return fmt.Errorf("%w: downloading %s from Discord's CDN at %s: %s", envelope.ErrTargetUnavailable, a.Name, link.Host, s.api.scrub(err.Error()))
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound, http.StatusForbidden, http.StatusGone:
		return errExpired
	default:
		return fmt.Errorf("%w: Discord's CDN at %s answered %d to the download of %s", deliver.StatusClass(resp.StatusCode), link.Host, resp.StatusCode, a.Name)
	}
	limit := a.Size
	if limit <= 0 {
		limit = maxDownload
	}
	tooBig := fmt.Errorf("%w: Discord's CDN sent more of %s than the %s Discord announced; it was not kept", envelope.ErrValidation, a.Name, bus.Bytes(limit))
	if resp.ContentLength > limit {
		return tooBig
	}
	n, err := io.Copy(w, io.LimitReader(resp.Body, limit+1))
	switch {
	case err != nil:
		return fmt.Errorf("%w: downloading %s from Discord's CDN: %s", envelope.ErrTargetUnavailable, a.Name, s.api.scrub(err.Error()))
	case n > limit:
		return tooBig
	}
	return nil
}

// freshLink asks Discord for the message o names (GET
// /channels/{channel}/messages/{message}), which comes with fresh links to
// its files, and returns a's.
func (s *sender) freshLink(ctx context.Context, o origin, a envelope.Attachment) (*url.URL, error) {
	const tmpl = "/channels/{channel}/messages/{message}"
	var m struct {
		Attachments []struct {
			ID  string `json:"id"`
			URL string `json:"url"`
		} `json:"attachments"`
	}
	err := s.do(ctx, "GET", tmpl, "/channels/"+o.channel+"/messages/"+o.message, o.channel, nil, &m)
	if ae, ok := errors.AsType[*apiError](err); ok && ae.code == codeUnknownMessage {
		return nil, fmt.Errorf("%w: the message %s came with was deleted, and Discord no longer serves the file; ask the person to send it again", envelope.ErrNotFound, a.Name)
	}
	if err != nil {
		return nil, s.classified(ctx, err, "fetch message "+o.message+" for a fresh link to "+a.Name, o.channel)
	}
	for _, at := range m.Attachments {
		if at.ID != o.attachment {
			continue
		}
		u, err := url.Parse(at.URL)
		if err != nil || !s.fromDiscord(u) {
			return nil, fmt.Errorf("%w: Discord named a link to %s that is not on its CDN; check api_url %s", envelope.ErrTargetUnavailable, a.Name, s.api.base)
		}
		return u, nil
	}
	return nil, fmt.Errorf("%w: %s was removed from its message; ask the person to send it again", envelope.ErrNotFound, a.Name)
}
