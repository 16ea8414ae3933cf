package slack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/heraldhq/herald/pkg/bus"
	slackspec "github.com/heraldhq/herald/pkg/channel/slack"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

const (
	// MaxFileSize is the largest file Slack takes
	// (files.getUploadURLExternal: 1 GB), and so the largest Fetch hands
	// over; pkg/channel/slack, which holds Slack's sends to it, says so.
	MaxFileSize = slackspec.MaxFile
	// minTransferRate is the slowest a file's bytes may move before the
	// transfer is given up: its time is requestTimeout and its size at
	// this rate.
	minTransferRate = 256 << 10 // bytes a second
)

var (
	// unseen are the methods nothing of which shows in Slack: an upload is
	// seen only once files.completeUploadExternal shares it.
	unseen = map[string]bool{"files.getUploadURLExternal": true, "files.info": true}
	// conversationID is a channel, private channel or direct message id,
	// what files.completeUploadExternal takes as channel_id (not a user's
	// U… or a #name, which chat.postMessage resolves).
	conversationID = regexp.MustCompile(`^[CGD][A-Z0-9]{2,}$`)
)

// postFiles sends d's message with its files. The message is the files'
// initial_comment when it is one chunk without buttons (which a comment
// cannot carry) and channel is a conversation id; else it goes first as
// messages of its own, and the files follow in the conversation Slack
// named for the last of them. Sharing the files is one chunk, Begin
// before its first upload: the uploads show nothing until
// files.completeUploadExternal, so a retry after it shares nothing again
// and one before it uploads afresh.
func (s *sender) postFiles(ctx context.Context, d deliver.Delivery, channel, threadTS string, parts []slackspec.Chunk, buttons *block) (deliver.Receipt, error) {
	texts, comment := parts, ""
	if len(parts) == 1 && buttons == nil && conversationID.MatchString(channel) {
		texts, comment = nil, fileComment(d, parts[0])
	}
	last := "" // the id of the last text message
	if n := len(d.Done); n > 0 && n <= len(texts) {
		last = d.Done[n-1]
	}
	return d.SendChunks(len(texts)+1, func() error { return s.wait(ctx, channel) }, func(i int) (string, error) {
		if i < len(texts) {
			id, err := s.postChunk(ctx, d, channel, threadTS, texts, i, buttons)
			last = id
			return id, err
		}
		to := channel
		if th, ok := splitID(last); ok {
			to = th.channel
		}
		return s.shareFiles(ctx, d, to, threadTS, comment)
	})
}

// fileComment is a message sent as its files' initial_comment: plain
// mrkdwn, with no attachment to hold the subject, the colour and who
// wrote, so they are lines of it.
func fileComment(d deliver.Delivery, c slackspec.Chunk) string {
	var lines []string
	if subject := slackEscape(strings.TrimSpace(d.Subject)); subject != "" {
		lines = append(lines, "*"+subject+"*")
	}
	text := c.Text
	if d.Urgency == "high" {
		text = urgentPrefix + text
	}
	lines = append(lines, text)
	if f := footer(d); f != "" {
		lines = append(lines, "— "+f)
	}
	return strings.Join(lines, "\n")
}

// completeUpload is files.completeUploadExternal's body.
type completeUpload struct {
	Files          []uploadedFile `json:"files"`
	ChannelID      string         `json:"channel_id"`
	ThreadTS       string         `json:"thread_ts,omitempty"`
	InitialComment string         `json:"initial_comment,omitempty"`
}

type uploadedFile struct {
	ID    string `json:"id"`
	Title string `json:"title"`
}

// shareFiles uploads d's files and shares them in channel (the thread of
// threadTS), with comment as the message's text, in one
// files.completeUploadExternal. Its id is the first file's: Slack answers
// with the files, not the message, which it posts once they are processed
// (files.info of that file names the message).
func (s *sender) shareFiles(ctx context.Context, d deliver.Delivery, channel, threadTS, comment string) (string, error) {
	files := make([]uploadedFile, 0, len(d.Files))
	for _, f := range d.Files {
		id, err := s.upload(ctx, f)
		if err != nil {
			return "", err
		}
		files = append(files, uploadedFile{ID: id, Title: f.Name})
	}
	ans, err := s.do(ctx, "files.completeUploadExternal", channel, completeUpload{Files: files, ChannelID: channel, ThreadTS: threadTS, InitialComment: comment})
	if err == nil && (len(ans.Files) == 0 || ans.Files[0].ID == "") {
		err = fmt.Errorf("%w: Slack accepted files.completeUploadExternal to %s but named no file; check that api_url %s is the Web API", envelope.ErrTargetUnavailable, channel, s.apiURL)
	}
	if err != nil {
		return "", err
	}
	return ans.Files[0].ID, nil
}

// upload sends the bytes of f to Slack and returns its file id:
// files.getUploadURLExternal names where, and the spooled copy is streamed
// there.
func (s *sender) upload(ctx context.Context, f deliver.File) (string, error) {
	r, err := os.Open(f.Path)
	if err != nil {
		return "", fmt.Errorf("%w: file %s: %w", envelope.ErrInternal, f.Name, err)
	}
	defer r.Close()
	info, err := r.Stat()
	if err != nil {
		return "", fmt.Errorf("%w: file %s: %w", envelope.ErrInternal, f.Name, err)
	}
	ans, err := s.do(ctx, "files.getUploadURLExternal", "", url.Values{"filename": {f.Name}, "length": {strconv.FormatInt(info.Size(), 10)}})
	if err != nil {
		return "", err
	}
	if ans.UploadURL == "" || ans.FileID == "" {
		return "", fmt.Errorf("%w: Slack named no upload_url or file_id for %s; check that api_url %s is the Web API", envelope.ErrTargetUnavailable, f.Name, s.apiURL)
	}
	return ans.FileID, s.sendBytes(ctx, ans.UploadURL, f.Name, r, info.Size())
}

// sendBytes posts size bytes of r, file name's, to Slack's upload URL
// link as the raw body. Nothing of it shows until the share, so a failure
// (none answered, or a refusal) is never uncertain: the next attempt
// uploads again.
func (s *sender) sendBytes(ctx context.Context, link, name string, r io.Reader, size int64) error {
	u, err := url.Parse(link)
	if err != nil || !s.onSlack(u) {
		return fmt.Errorf("%w: Slack named an upload URL for %s that is not on Slack (%s), and Herald sends the bot token to Slack alone; check api_url %s",
			envelope.ErrTargetUnavailable, name, hostOf(u), s.apiURL)
	}
	ctx, cancel := context.WithTimeout(ctx, s.transferTimeout(size))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, link, io.LimitReader(r, size))
	if err != nil {
		return fmt.Errorf("%w: the upload of %s: %s", envelope.ErrInternal, name, s.secrets.WithURL(u).Scrub(err.Error()))
	}
	req.ContentLength = size
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("Authorization", "Bearer "+s.token)
	caller := deliver.Caller{Client: s.transfer, Secrets: s.secrets.WithURL(u)} // the URL is a credential too
	if _, err := caller.Do(req); err != nil {
		if ce, ok := errors.AsType[*deliver.CallError](err); ok && ce.Status == http.StatusRequestEntityTooLarge {
			return fmt.Errorf("%w: Slack refused %s as too big (413): Slack takes files of up to %s, and a workspace may restrict large uploads; send a smaller file, or a link to it",
				envelope.ErrValidation, name, bus.Bytes(MaxFileSize))
		}
		return fmt.Errorf("%w: uploading %s to Slack failed (%s); nothing was posted, so a retry uploads it afresh", envelope.ErrTargetUnavailable, name, err)
	}
	return nil
}

// transferTimeout bounds the transfer of a file of size bytes.
func (s *sender) transferTimeout(size int64) time.Duration {
	return s.client.Timeout + time.Duration(size/minTransferRate)*time.Second
}

// onSlack reports whether u is where Herald sends the bot token with a
// file's bytes, to and from: https on Slack's own hosts (slack.com,
// files.slack.com), or the host of api_url (a fake in tests, a proxy in
// front of Slack). The links come from Slack's answers, and a file shared
// from outside Slack (Google Drive) has its url_private there: were any
// host taken, the token, which reads the whole workspace, would go to
// it. No redirect is followed either (deliver.NewClient).
func (s *sender) onSlack(u *url.URL) bool {
	if u == nil || u.User != nil || u.Opaque != "" || u.Host == "" {
		return false
	}
	host := strings.ToLower(u.Hostname())
	if u.Scheme == "https" && (host == "slack.com" || strings.HasSuffix(host, ".slack.com")) && (u.Port() == "" || u.Port() == "443") {
		return true
	}
	api, err := url.Parse(s.apiURL)
	return err == nil && u.Scheme == api.Scheme && strings.EqualFold(u.Host, api.Host)
}

func hostOf(u *url.URL) string {
	if u == nil || u.Host == "" {
		return "no host"
	}
	return "host " + u.Host
}

// fileInfo is the part of files.info's file Fetch reads.
type fileInfo struct {
	Name               string `json:"name"`
	Size               int64  `json:"size"`
	URLPrivate         string `json:"url_private"`
	URLPrivateDownload string `json:"url_private_download"`
}

// Fetch writes the file of attachment a (deliver.Fetcher), whose ref names
// its id (ingress.go): files.info names its links, and url_private_download
// (else url_private) is downloaded with the bot token, which Slack asks
// of a private file's links.
func (s *sender) Fetch(ctx context.Context, a envelope.Attachment, w io.Writer) error {
	id, ok := strings.CutPrefix(a.Ref, fileRefPrefix)
	if !ok || !idPattern.MatchString(id) {
		return fmt.Errorf("%w: %q is not a Slack file", envelope.ErrValidation, a.Ref)
	}
	if a.Size > MaxFileSize {
		return fetchTooBig(a.Name, a.Size)
	}
	ans, err := s.do(ctx, "files.info", "", url.Values{"file": {id}})
	if err != nil {
		return err
	}
	f := ans.File
	if f == nil {
		return fmt.Errorf("%w: Slack answered files.info of %s with no file; check that api_url %s is the Web API", envelope.ErrTargetUnavailable, id, s.apiURL)
	}
	if f.Size > MaxFileSize {
		return fetchTooBig(a.Name, f.Size)
	}
	link := f.URLPrivateDownload
	if link == "" {
		link = f.URLPrivate
	}
	u, err := url.Parse(link)
	if err != nil || !s.onSlack(u) {
		return fmt.Errorf("%w: %s is kept outside Slack (%s), and Herald downloads with the bot token from Slack alone; ask for the file itself, or a link to it",
			envelope.ErrValidation, a.Name, hostOf(u))
	}
	return s.download(ctx, u, a.Name, f.Size, w)
}

func fetchTooBig(name string, size int64) error {
	return fmt.Errorf("%w: %s is %s, and Slack holds files of up to %s; ask for it another way", envelope.ErrValidation, name, bus.Bytes(size), bus.Bytes(MaxFileSize))
}

// download copies the file at u to w as it comes: at most size bytes, the
// size files.info named (MaxFileSize when it named none).
func (s *sender) download(ctx context.Context, u *url.URL, name string, size int64, w io.Writer) error {
	limit := size
	if limit <= 0 {
		limit = MaxFileSize
	}
	ctx, cancel := context.WithTimeout(ctx, s.transferTimeout(limit))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fmt.Errorf("%w: the link of %s: %s", envelope.ErrInternal, name, s.secrets.Scrub(err.Error()))
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := s.transfer.Do(req)
	if moved, ok := errors.AsType[*deliver.RedirectError](err); ok {
		// Slack sends a request it does not let see the file to its
		// sign-in page.
		return fmt.Errorf("%w: Slack sent the download of %s to %s: the bot token may not read it; add the files:read scope, reinstall the app and put the new token in token_env or token_file of integration %q",
			envelope.ErrForbidden, name, s.secrets.Scrub(moved.Location), s.id)
	}
	if err != nil {
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err // its text starts with the URL, named better here
		}
		return fmt.Errorf("%w: downloading %s from Slack at %s: %s", envelope.ErrTargetUnavailable, name, u.Host, s.secrets.Scrub(err.Error()))
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound, resp.StatusCode == http.StatusGone:
		return fmt.Errorf("%w: Slack no longer has %s (%d): it was deleted; ask for it again", envelope.ErrNotFound, name, resp.StatusCode)
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("%w: Slack at %s answered %d to the download of %s", deliver.StatusClass(resp.StatusCode), u.Host, resp.StatusCode, name)
	}
	tooBig := fmt.Errorf("%w: Slack sent more of %s than the %s files.info named; it was not kept", envelope.ErrValidation, name, bus.Bytes(limit))
	if resp.ContentLength > limit {
		return tooBig
	}
	n, err := io.Copy(w, io.LimitReader(resp.Body, limit+1))
	switch {
	case err != nil:
		return fmt.Errorf("%w: downloading %s from Slack: %s", envelope.ErrTargetUnavailable, name, s.secrets.Scrub(err.Error()))
	case n > limit:
		return tooBig
	}
	return nil
}
