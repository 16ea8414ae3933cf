package slacktest

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/heraldhq/herald/services/messenger/deliver/delivertest"
)

// MaxFileSize is the largest file files.getUploadURLExternal takes (1 GB),
// unless LimitUploads lowers it as a workspace's restriction does.
const MaxFileSize = 1 << 30

// Where the fake serves what is not the Web API: the upload URLs that
// files.getUploadURLExternal hands out (files.slack.com/upload/v1/… at
// Slack), and files' url_private and url_private_download
// (files.slack.com/files-pri/…).
const (
	uploadPath = "/upload/v1/"
	filesPath  = "/files-pri/"
)

func init() {
	methods["files.getUploadURLExternal"] = (*Server).getUploadURL
	methods["files.completeUploadExternal"] = (*Server).completeUpload
	methods["files.info"] = (*Server).filesInfo
}

// storedFile is a file the fake holds: one a person shared (AddFile,
// ExternalFile), or one the app is uploading or has shared.
type storedFile struct {
	File
	data []byte
	// mediaType is the type the upload's wire gave, "" for none.
	mediaType string
	// length is what files.getUploadURLExternal was told; uploaded is
	// set once that many bytes came.
	length   int64
	uploaded bool
	shared   bool
	deleted  bool
	// external is the link of a file kept outside Slack (Google Drive,
	// Dropbox), which Slack shows as url_private.
	external string
}

// Upload is one file of a share, as the app uploaded it.
type Upload struct {
	ID, Name, Title string
	// MediaType is the Content-Type the bytes came with (a multipart
	// part's, or a raw body's other than application/octet-stream); ""
	// where the wire carried none, and Slack tells the type itself.
	MediaType string
	Data      []byte
}

// Share is one files.completeUploadExternal the fake carried out: the
// files it shared, where, and the message text that came with them.
type Share struct {
	Channel, ThreadTS, InitialComment string
	// TS is the message the files were shared in.
	TS    string
	Files []Upload
}

// Shares returns the shares carried out, in order.
func (s *Server) Shares() []Share {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Share, len(s.shares))
	for i, sh := range s.shares {
		sh.Files = append([]Upload(nil), sh.Files...)
		out[i] = sh
	}
	return out
}

// LimitUploads makes files.getUploadURLExternal refuse files over n bytes
// with file_upload_size_restricted, and the upload URL answer 413 to a
// body over n bytes, as when a workspace restricts large uploads.
func (s *Server) LimitUploads(n int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fileLimit = n
}

// AddFile keeps data as a file a person shared, for a MessageEvent's
// Files: files.info describes it and its url_private_download serves it
// to the app's token.
func (s *Server) AddFile(name, mimetype string, data []byte) File {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.newFileLocked(name)
	f.Mimetype, f.Size, f.data, f.length = mimetype, int64(len(data)), append([]byte(nil), data...), int64(len(data))
	f.uploaded, f.shared = true, true
	return f.File
}

// ExternalFile is a file a person shared from outside Slack (Google
// Drive, Dropbox): files.info names link as its url_private, and Slack
// serves no download of it.
func (s *Server) ExternalFile(name, link string) File {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.newFileLocked(name)
	f.Mimetype, f.external, f.uploaded, f.shared = "application/octet-stream", link, true, true
	return f.File
}

// DeleteFile deletes file id: files.info answers file_deleted, and its
// links 404.
func (s *Server) DeleteFile(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f := s.files[id]; f != nil {
		f.deleted = true
	}
}

func (s *Server) newFileLocked(name string) *storedFile {
	f := &storedFile{File: File{ID: fmt.Sprintf("F0FILE%04d", len(s.files)+1), Name: name, Title: name}}
	s.files[f.ID] = f
	return f
}

// getUploadURL is files.getUploadURLExternal: a file id and the URL to
// send its length bytes to. Its arguments are read from a form, as
// Slack's SDKs send them; a JSON body is refused (invalid_arguments) so
// that a client is held to that.
func (s *Server) getUploadURL(req *request) (map[string]any, error) {
	p := req.params
	if req.call.ContentType == "application/json" {
		return nil, refuse("invalid_arguments")
	}
	length, err := strconv.ParseInt(p["length"], 10, 64)
	switch {
	case p["filename"] == "" || p["length"] == "":
		return nil, refuse("missing_argument")
	case err != nil || length < 0:
		return nil, refuse("invalid_arguments")
	case length == 0:
		return nil, refuse("missing_argument") // Slack's answer to an empty file
	case length > s.fileLimit:
		return nil, refuse("file_upload_size_restricted")
	}
	f := s.newFileLocked(p["filename"])
	f.length = length
	key := randomSecret(32)
	s.uploads[key] = f
	return map[string]any{"upload_url": s.http.URL + uploadPath + key, "file_id": f.ID}, nil
}

// serveUpload takes the bytes of a file at its upload URL, as Slack does:
// a raw body or a multipart form (its file part), which must hold the
// length files.getUploadURLExternal was told. The URL is the credential;
// an Authorization header, if sent, must hold the app's token. Faults
// and hooks apply under the method name "upload".
func (s *Server) serveUpload(w http.ResponseWriter, r *http.Request) {
	call := Call{Method: "upload", Arrived: time.Now(), ContentType: r.Header.Get("Content-Type"), Params: map[string]string{}}
	call.Token, call.TokenIn = token(r, nil, "")
	key := strings.TrimPrefix(r.URL.Path, uploadPath)
	data, mediaType, name, status := s.readUpload(r)

	s.mu.Lock()
	f := s.uploads[key]
	var err error
	switch {
	case r.Method != http.MethodPost:
		status = http.StatusMethodNotAllowed
	case f == nil:
		status = http.StatusNotFound
	case call.TokenIn != "" && call.Token != s.token:
		status = http.StatusUnauthorized
	}
	if status == http.StatusOK {
		err = s.injectedLocked("upload", call.Params)
	}
	if status == http.StatusOK && err == nil && int64(len(data)) != f.length {
		status = http.StatusBadRequest // not the length announced
	}
	if f != nil {
		call.Params["file_id"] = f.ID
	}
	call.Params["length"] = strconv.Itoa(len(data))
	var (
		hook   func(Call)
		hangUp bool
	)
	if status == http.StatusOK && err == nil {
		f.data, f.mediaType, f.Size, f.uploaded = data, mediaType, int64(len(data)), true
		if name != "" {
			f.Name = name
		}
		hook, hangUp = s.calls.Accept(call.Method)
		call.HungUp = hangUp
	}
	call.Status = status
	if ae, ok := err.(*apiError); ok {
		call.Status, call.Error = ae.status, ae.code
	}
	i := s.calls.Add(call)
	s.mu.Unlock()
	s.calls.Answer(i, hook, func(c *Call) { c.Answered = time.Now() })

	switch {
	case hangUp:
		delivertest.HangUp(w)
	case err != nil:
		writeError(w, err.(*apiError), nil)
	case status != http.StatusOK:
		http.Error(w, http.StatusText(status), status)
	default:
		fmt.Fprintf(w, "OK - %d", len(data))
	}
}

// readUpload reads an upload's bytes, its media type where the wire gave
// one and a multipart part's file name; the status is 413 for a body over
// the upload limit, 400 for one that cannot be read.
func (s *Server) readUpload(r *http.Request) (data []byte, mediaType, name string, status int) {
	s.mu.Lock()
	limit := s.fileLimit
	s.mu.Unlock()
	body := io.Reader(r.Body)
	mediaType, _, _ = mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mediaType == "multipart/form-data" {
		part, err := filePart(r)
		if err != nil {
			return nil, "", "", http.StatusBadRequest
		}
		defer part.Close()
		body, name = part, part.FileName()
		mediaType, _, _ = mime.ParseMediaType(part.Header.Get("Content-Type"))
	}
	if mediaType == "application/octet-stream" {
		mediaType = ""
	}
	data, err := io.ReadAll(io.LimitReader(body, limit+1))
	switch {
	case err != nil:
		return nil, "", "", http.StatusBadRequest
	case int64(len(data)) > limit:
		return nil, "", "", http.StatusRequestEntityTooLarge
	}
	return data, mediaType, name, http.StatusOK
}

// filePart is the file part of a multipart upload, as curl -F
// file=@name sends it.
func filePart(r *http.Request) (*multipart.Part, error) {
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, err
	}
	for {
		part, err := mr.NextPart()
		if err != nil {
			return nil, err
		}
		if part.FileName() != "" {
			return part, nil
		}
		_ = part.Close()
	}
}

// completeUpload is files.completeUploadExternal: it shares files uploaded
// to channel_id (in the thread of thread_ts), with initial_comment as the
// message's text, and answers with the files. Slack posts that message
// once the files are processed, after answering; the fake does so at once.
func (s *Server) completeUpload(req *request) (map[string]any, error) {
	p := req.params
	var refs []struct {
		ID    string `json:"id"`
		Title string `json:"title"`
	}
	if err := json.Unmarshal([]byte(p["files"]), &refs); err != nil {
		return nil, refuse("invalid_arguments")
	}
	if len(refs) == 0 {
		return nil, refuse("missing_argument")
	}
	ch := p["channel_id"]
	switch {
	case !channelID.MatchString(ch):
		return nil, refuse("channel_not_found")
	case s.chanErrs[ch] != "":
		return nil, refuse(s.chanErrs[ch])
	case p["thread_ts"] != "" && !tsPattern.MatchString(p["thread_ts"]):
		return nil, refuse("invalid_thread_ts")
	case len([]rune(p["initial_comment"])) > MaxTextLength:
		return nil, refuse("msg_too_long")
	}
	sh := Share{Channel: ch, ThreadTS: p["thread_ts"], InitialComment: p["initial_comment"]}
	var answered []map[string]any
	for _, ref := range refs {
		f := s.files[ref.ID]
		if f == nil || !f.uploaded || f.deleted || f.shared {
			return nil, refuse("file_not_found")
		}
		if ref.Title != "" {
			f.Title = ref.Title
		}
		sh.Files = append(sh.Files, Upload{ID: f.ID, Name: f.Name, Title: f.Title, MediaType: f.mediaType, Data: f.data})
		answered = append(answered, map[string]any{"id": f.ID, "title": f.Title})
	}
	m := &Message{Type: "message", Channel: ch, User: s.botUser, BotID: s.botID, AppID: s.appID, Team: s.team,
		Text: sh.InitialComment, TS: s.nextTSLocked(), ThreadTS: sh.ThreadTS}
	for _, u := range sh.Files {
		f := s.files[u.ID]
		f.shared = true
		f.Mimetype = mimetypeOf(f)
		m.Files = append(m.Files, f.File)
	}
	c := s.channelLocked(ch)
	c.messages = append(c.messages, m)
	sh.TS = m.TS
	s.shares = append(s.shares, sh)
	req.call.Channel, req.call.TS = ch, m.TS
	return map[string]any{"files": answered}, nil
}

// mimetypeOf is the type Slack shows a file as: the upload's, else told
// from its bytes.
func mimetypeOf(f *storedFile) string {
	if f.mediaType != "" {
		return f.mediaType
	}
	t, _, _ := mime.ParseMediaType(http.DetectContentType(f.data))
	return t
}

// filesInfo is files.info: a file shared in the workspace, with the links
// the app downloads it by.
func (s *Server) filesInfo(req *request) (map[string]any, error) {
	f := s.files[req.params["file"]]
	switch {
	case f == nil || !f.shared:
		return nil, refuse("file_not_found")
	case f.deleted:
		return nil, refuse("file_deleted")
	}
	info := map[string]any{"id": f.ID, "name": f.Name, "title": f.Title, "mimetype": f.Mimetype, "size": f.Size, "is_external": f.external != ""}
	if f.external != "" {
		info["external_type"], info["url_private"] = "gdrive", f.external
	} else {
		base := s.http.URL + filesPath + s.team + "-" + f.ID + "/"
		info["url_private"] = base + url.PathEscape(f.Name)
		info["url_private_download"] = base + "download/" + url.PathEscape(f.Name)
	}
	return map[string]any{"file": info}, nil
}

// serveDownload serves a file's url_private and url_private_download to
// the app's token, as files.slack.com does. A request without it is sent
// to the sign-in page (302), as Slack sends a browser; a deleted or
// unknown file is 404. Every download is recorded as a call of method
// "download".
func (s *Server) serveDownload(w http.ResponseWriter, r *http.Request) {
	call := Call{Method: "download", Arrived: time.Now(), Params: map[string]string{}}
	call.Token, call.TokenIn = token(r, nil, "")
	idPart, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, filesPath), "/")
	_, id, _ := strings.Cut(idPart, "-")
	call.Params["file"] = id

	s.mu.Lock()
	f := s.files[id]
	status := http.StatusOK
	switch {
	case r.Method != http.MethodGet:
		status = http.StatusMethodNotAllowed
	case call.TokenIn != "header" || call.Token != s.token:
		status = http.StatusFound
	case f == nil || f.deleted || !f.shared || f.external != "":
		status = http.StatusNotFound
	}
	var data []byte
	if status == http.StatusOK {
		data = f.data
	}
	call.Status = status
	s.calls.Add(call)
	s.mu.Unlock()

	switch status {
	case http.StatusOK:
		w.Header().Set("Content-Type", mimetypeOf(f))
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		_, _ = w.Write(data)
	case http.StatusFound:
		http.Redirect(w, r, s.http.URL+"/?redir="+url.QueryEscape(r.URL.Path), http.StatusFound)
	default:
		http.Error(w, http.StatusText(status), status)
	}
}
