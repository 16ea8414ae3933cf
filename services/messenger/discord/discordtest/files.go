package discordtest

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"hash/fnv"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Discord's limits on what a bot uploads with a message.
const (
	// MaxFiles is how many files one message carries.
	MaxFiles = 10
	// DefaultMaxFile is the largest file a server without boosts takes
	// (and a direct message); SetFileLimit changes it.
	DefaultMaxFile = 10 << 20
)

// RouteCDN is a download from the CDN (cdn.discordapp.com), which the fake
// serves on its own host; its calls are recorded with the others.
const RouteCDN = "GET /attachments/{channel}/{attachment}/{filename}"

// linkLife is how long a CDN link stays valid, as Discord's (about a day).
const linkLife = 24 * time.Hour

// Upload is one file part of a message a bot posted, as the multipart
// body carried it.
type Upload struct {
	// Field is the part's name, files[n].
	Field string
	// Name is the part's filename; ContentType its Content-Type.
	Name, ContentType string
	Data              []byte
}

// AttachmentRef is one entry of a message's attachments array, naming
// the part files[ID] of the same request.
type AttachmentRef struct {
	ID          json.Number `json:"id"`
	Filename    string      `json:"filename,omitempty"`
	Description string      `json:"description,omitempty"`
}

// cdnFile is a file the CDN serves.
type cdnFile struct {
	contentType string
	data        []byte
}

// form is a multipart/form-data request body: its payload_json part and
// its files, each read up to the file limit (over: cut there).
type form struct {
	payload []byte
	files   []Upload
	over    bool   // a file is over the limit
	bad     string // a part Discord does not take
	broken  bool   // not a multipart body
}

// filePart is the form name of a file: files[n].
var filePart = regexp.MustCompile(`^files\[([0-9]{1,3})\]$`)

// SetFileLimit sets the largest file a message may carry (DefaultMaxFile
// until then); a bigger one is refused with 413 and Discord's 40005
// "Request entity too large".
func (s *Server) SetFileLimit(n int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fileLimit = n
}

// Uploads are the files of the messages the server took, in order.
func (s *Server) Uploads() []Upload {
	var out []Upload
	for _, c := range s.Accepted(RouteCreateMessage) {
		out = append(out, c.Files...)
	}
	return out
}

// NewAttachment keeps data as a file a person attached to a message in
// channel, and returns the attachment to put in MessageOptions: its URL is
// a signed CDN link, as Discord's, valid until ExpireLinks.
func (s *Server) NewAttachment(channel, name, contentType string, data []byte) Attachment {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.attachLocked(channel, name, contentType, data)
}

// ExpireLinks makes every CDN link handed out so far expire, as Discord's
// do after a day: fetching the message again (GET
// /channels/{id}/messages/{id}) gives fresh ones.
func (s *Server) ExpireLinks() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.linkEpoch++
}

func (s *Server) attachLocked(channel, name, contentType string, data []byte) Attachment {
	id := s.nextIDLocked()
	path := "/attachments/" + channel + "/" + id + "/" + name
	s.cdn[path] = &cdnFile{contentType: contentType, data: append([]byte(nil), data...)}
	link := s.signLocked(path)
	return Attachment{ID: id, Filename: name, ContentType: contentType, Size: int64(len(data)), URL: link, ProxyURL: link}
}

// signLocked is the CDN link of path, signed as Discord's are: ex (when
// it expires) and is (when it was issued) in hex seconds, and hm, their
// signature.
func (s *Server) signLocked(path string) string {
	t := time.Now()
	ex := strconv.FormatInt(t.Add(linkLife).Unix(), 16)
	is := strconv.FormatInt(t.Unix(), 16)
	u := url.URL{Path: path}
	return s.http.URL + u.EscapedPath() + "?ex=" + ex + "&is=" + is + "&hm=" + s.hmLocked(path, ex, is)
}

func (s *Server) hmLocked(path, ex, is string) string {
	h := fnv.New64a()
	_, _ = io.WriteString(h, s.token+"\x00"+strconv.Itoa(s.linkEpoch)+"\x00"+path+"\x00"+ex+"\x00"+is)
	return hex.EncodeToString(h.Sum(nil))
}

// validLocked reports whether q signs path and has not expired.
func (s *Server) validLocked(path string, q url.Values) bool {
	ex, err := strconv.ParseInt(q.Get("ex"), 16, 64)
	return err == nil && time.Now().Unix() < ex && q.Get("hm") == s.hmLocked(path, q.Get("ex"), q.Get("is"))
}

// freshLocked is m with its attachments' links signed anew, as Discord
// hands them out with a message fetched.
func (s *Server) freshLocked(m *Message) Message {
	out := copyMessage(m)
	for i, a := range out.Attachments {
		if u, err := url.Parse(a.URL); err == nil && s.cdn[u.Path] != nil {
			out.Attachments[i].URL = s.signLocked(u.Path)
			out.Attachments[i].ProxyURL = out.Attachments[i].URL
		}
	}
	return out
}

// serveCDN answers a download as cdn.discordapp.com does: the file for a
// link signed and unexpired (no token needed), else 404 "This content is
// no longer available.".
func (s *Server) serveCDN(w http.ResponseWriter, r *http.Request) {
	call := Call{Route: RouteCDN, Method: r.Method, Path: r.URL.Path, Arrived: time.Now(),
		Authorization: r.Header.Get("Authorization"), UserAgent: r.Header.Get("User-Agent")}
	s.mu.Lock()
	f := s.cdn[r.URL.Path]
	ok := f != nil && r.Method == http.MethodGet && s.validLocked(r.URL.Path, r.URL.Query())
	s.mu.Unlock()
	call.Status = http.StatusOK
	if !ok {
		call.Status = http.StatusNotFound
	}
	call.Answered = time.Now()
	s.calls.Add(call)
	if !ok {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, "This content is no longer available.")
		return
	}
	if f.contentType != "" {
		w.Header().Set("Content-Type", f.contentType)
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(f.data)))
	_, _ = w.Write(f.data)
}

// readForm reads a multipart/form-data body as Discord does: payload_json
// and the parts files[n], each kept up to limit bytes.
func readForm(r *http.Request, limit int64) *form {
	f := &form{}
	mr, err := r.MultipartReader()
	if err != nil {
		f.broken = true
		return f
	}
	for {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return f
		}
		if err != nil {
			f.broken = true
			return f
		}
		if err := f.read(p, limit); err != nil {
			f.broken = true
			return f
		}
	}
}

// read keeps part p of the form.
func (f *form) read(p *multipart.Part, limit int64) error {
	defer p.Close()
	name := p.FormName()
	switch {
	case name == "payload_json":
		var err error
		f.payload, err = io.ReadAll(io.LimitReader(p, maxBody))
		return err
	case filePart.MatchString(name):
		data, err := io.ReadAll(io.LimitReader(p, limit+1))
		if err != nil {
			return err
		}
		if int64(len(data)) > limit {
			f.over = true
			data = nil
		}
		f.files = append(f.files, Upload{Field: name, Name: p.FileName(), ContentType: p.Header.Get("Content-Type"), Data: data})
	default:
		f.bad = name
	}
	_, err := io.Copy(io.Discard, p)
	return err
}

// isForm reports whether r's body is multipart/form-data.
func isForm(r *http.Request) bool {
	t, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && t == "multipart/form-data"
}

// uploadsLocked are the files of message body p, sent in req's form:
// those p.Attachments names (each must have its part files[id]), or every
// file part if it names none, as Discord takes them.
func uploadsLocked(req *request, p *CreateMessage) ([]Upload, error) {
	f := req.form
	switch {
	case f == nil && len(p.Attachments) > 0:
		return nil, formError("attachments.0", "ATTACHMENT_NOT_FOUND", "Attachment data not found")
	case f == nil:
		return nil, nil
	case f.broken:
		return nil, formError("_", "MULTIPART_INVALID", "Could not parse the multipart body.")
	case f.over:
		return nil, refuse(http.StatusRequestEntityTooLarge, 40005, "Request entity too large")
	case f.bad != "":
		return nil, formError(f.bad, "BASE_TYPE_UNKNOWN", "Unknown form field")
	}
	byField := map[string]Upload{}
	for _, u := range f.files {
		byField[u.Field] = u
	}
	refs := p.Attachments
	if len(refs) == 0 {
		for i := range f.files {
			refs = append(refs, AttachmentRef{ID: json.Number(strconv.Itoa(i))})
		}
	}
	if len(refs) > MaxFiles {
		return nil, formError("attachments", "BASE_TYPE_MAX_LENGTH", "Must be "+strconv.Itoa(MaxFiles)+" or fewer in length.")
	}
	var out []Upload
	for i, ref := range refs {
		u, ok := byField["files["+ref.ID.String()+"]"]
		if !ok {
			return nil, formError("attachments."+strconv.Itoa(i), "ATTACHMENT_NOT_FOUND", "Attachment data not found")
		}
		if ref.Filename != "" {
			u.Name = ref.Filename
		}
		if strings.TrimSpace(u.Name) == "" {
			return nil, formError("attachments."+strconv.Itoa(i)+".filename", "BASE_TYPE_REQUIRED", "This field is required")
		}
		out = append(out, u)
	}
	return out, nil
}

// getMessage is Discord's Get Channel Message, with fresh CDN links.
func (s *Server) getMessage(req *request) (int, any, error) {
	c, err := s.channelLocked(req.params["channel"])
	if err != nil {
		return 0, nil, err
	}
	m := s.messageLocked(c.ID, req.params["message"])
	if m == nil {
		return 0, nil, refuse(http.StatusNotFound, 10008, "Unknown Message")
	}
	out := s.freshLocked(m)
	return http.StatusOK, &out, nil
}
