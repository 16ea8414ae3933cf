package telegramtest

import (
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// MaxDownload is the largest file getFile hands a bot (the Bot API's 20 MB).
const MaxDownload = 20 << 20

func init() {
	register("getFile", false, getFile)
}

// storedFile is a file the fake holds, as a person sent it.
type storedFile struct {
	id, uniqueID, path string
	data               []byte
}

// AddFile keeps data as a file a person sent, for a message's Photo, Voice
// or Document: its file_id, which getFile and the file URL serve as the
// Bot API does. Bots see the file under every token.
func (s *Server) AddFile(data []byte, name string) (fileID, uniqueID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.files) + 1
	f := &storedFile{
		id:       "AgAC" + strconv.Itoa(n) + "-" + randomSecret()[2:20],
		uniqueID: "AQAD" + strconv.Itoa(n),
		data:     append([]byte(nil), data...),
	}
	f.path = "documents/file_" + strconv.Itoa(n)
	if i := strings.LastIndex(name, "."); i >= 0 {
		f.path += name[i:]
	}
	s.files[f.id] = f
	s.filePaths[f.path] = f
	return f.id, f.uniqueID
}

// Downloads counts the file downloads served (GET /file/bot<token>/<path>).
func (s *Server) Downloads() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.downloads
}

// SentFile is a file a bot sent: as a photo or a document, with the
// caption's visible text.
type SentFile struct {
	Kind    string // photo | document
	Upload  Upload
	Caption string
}

// SentFiles are the files bots sent, in order.
func (s *Server) SentFiles() []SentFile {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.sentFiles)
}

// getFile is the Bot API's: the file's path, to download within an hour;
// over 20 MB, "file is too big".
func getFile(s *Server, req *request) (any, error) {
	f := s.files[req.params["file_id"]]
	if f == nil {
		return nil, badRequest("invalid file_id")
	}
	if len(f.data) > MaxDownload {
		return nil, badRequest("file is too big")
	}
	return map[string]any{"file_id": f.id, "file_unique_id": f.uniqueID, "file_size": len(f.data), "file_path": f.path}, nil
}

// serveFile answers GET /file/bot<token>/<path>, as api.telegram.org does.
func (s *Server) serveFile(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, "/file/bot")
	token, path, ok := strings.Cut(rest, "/")
	s.mu.Lock()
	f, bot := s.filePaths[path], s.bots[token]
	if ok && f != nil && bot != nil {
		s.downloads++
	}
	s.mu.Unlock()
	switch {
	case !ok || bot == nil:
		http.Error(w, `{"ok":false,"error_code":401,"description":"Unauthorized"}`, http.StatusUnauthorized)
	case f == nil:
		http.Error(w, `{"ok":false,"error_code":404,"description":"Not Found"}`, http.StatusNotFound)
	default:
		w.Header().Set("Content-Length", strconv.Itoa(len(f.data)))
		_, _ = w.Write(f.data)
	}
}

func init() {
	register("sendPhoto", false, sendPhoto)
	register("sendDocument", false, sendDocument)
	register("sendMediaGroup", false, sendMediaGroup)
}

// Upload is one file a bot uploaded, as the multipart part carried it.
type Upload struct {
	Name        string
	ContentType string
	Data        []byte
}

// The Bot API's limits on what a bot uploads.
const (
	MaxUpload        = 50 << 20
	MaxPhotoUpload   = 10 << 20
	MaxCaptionLength = 1024
)

// readUploads reads r's file parts, keeping them on the request's form.
func readUploads(r *http.Request) error {
	for _, fhs := range r.MultipartForm.File {
		for _, fh := range fhs {
			if fh.Size > MaxUpload {
				return &apiError{code: http.StatusRequestEntityTooLarge, description: "Request Entity Too Large"}
			}
		}
	}
	return nil
}

// uploadsOf is the files of r's multipart form, by field.
func uploadsOf(r *http.Request) map[string]Upload {
	if r.MultipartForm == nil || len(r.MultipartForm.File) == 0 {
		return nil
	}
	out := map[string]Upload{}
	for k, fhs := range r.MultipartForm.File {
		f, err := fhs[0].Open()
		if err != nil {
			continue
		}
		data, _ := io.ReadAll(f)
		f.Close()
		out[k] = Upload{Name: fhs[0].Filename, ContentType: fhs[0].Header.Get("Content-Type"), Data: data}
	}
	return out
}

// caption is a media message's caption, checked as Telegram checks it.
func caption(p map[string]string, key string) (string, []Entity, error) {
	text := p[key]
	if text == "" {
		return "", nil, nil
	}
	if p["parse_mode"] != "HTML" && key == "caption" {
		return text, nil, nil
	}
	visible, entities, err := ParseHTML(text)
	if err != nil {
		return "", nil, badRequest("can't parse entities: %v", err)
	}
	if UTF16Len(visible) > MaxCaptionLength {
		return "", nil, badRequest("message caption is too long")
	}
	return visible, entities, nil
}

// keepLocked keeps an uploaded file as one the bot sent, under a new
// file id (as Telegram does, and getFile serves it).
func (s *Server) keepLocked(u Upload) string {
	n := len(s.files) + 1
	f := &storedFile{id: "BQAC" + strconv.Itoa(n) + "-" + randomSecret()[2:20], uniqueID: "AgAD" + strconv.Itoa(n), path: "documents/sent_" + strconv.Itoa(n), data: u.Data}
	s.files[f.id], s.filePaths[f.path] = f, f
	return f.id
}

// upload is the file a call's field names: an uploaded part
// ("attach://<part>" or the field itself), or an error as Telegram's.
func upload(req *request, field, ref string) (Upload, error) {
	if name, ok := strings.CutPrefix(ref, "attach://"); ok {
		field = name
	}
	u, ok := req.call.Files[field]
	if !ok {
		return Upload{}, badRequest("wrong file identifier/HTTP URL specified")
	}
	if len(u.Data) == 0 {
		return Upload{}, badRequest("file must be non-empty")
	}
	return u, nil
}

func sendPhoto(s *Server, req *request) (any, error) {
	return s.sendFile(req, "photo")
}

func sendDocument(s *Server, req *request) (any, error) {
	return s.sendFile(req, "document")
}

// sendFile is sendPhoto's and sendDocument's: the file uploaded as field
// kind, with its caption.
func (s *Server) sendFile(req *request, kind string) (any, error) {
	chat, err := s.chatLocked(req.params["chat_id"])
	if err != nil {
		return nil, err
	}
	u, err := upload(req, kind, req.params[kind])
	if err != nil {
		return nil, err
	}
	if kind == "photo" && len(u.Data) > MaxPhotoUpload {
		return nil, badRequest("PHOTO_INVALID_DIMENSIONS")
	}
	text, entities, err := caption(req.params, "caption")
	if err != nil {
		return nil, err
	}
	return s.postLocked(req, chat, func(m *Message) { s.fillLocked(m, kind, u, text, entities) })
}

// fillLocked makes m the message of file u sent as kind.
func (s *Server) fillLocked(m *Message, kind string, u Upload, text string, entities []Entity) {
	id := s.keepLocked(u)
	s.sentFiles = append(s.sentFiles, SentFile{Kind: kind, Upload: u, Caption: text})
	m.Caption, m.CaptionEntities = text, entities
	if kind == "photo" {
		m.Photo = []PhotoSize{{FileID: id, FileUniqueID: id, FileSize: int64(len(u.Data))}}
		return
	}
	m.Document = &Document{FileID: id, FileUniqueID: id, FileName: u.Name, MimeType: u.ContentType, FileSize: int64(len(u.Data))}
}

// sendMediaGroup is Telegram's: 2 to 10 photos, or 2 to 10 documents (not
// mixed), each a part named by "attach://", a caption on any; the answer is
// the messages, one per file.
func sendMediaGroup(s *Server, req *request) (any, error) {
	chat, err := s.chatLocked(req.params["chat_id"])
	if err != nil {
		return nil, err
	}
	var media []struct {
		Type      string `json:"type"`
		Media     string `json:"media"`
		Caption   string `json:"caption"`
		ParseMode string `json:"parse_mode"`
	}
	if err := json.Unmarshal([]byte(req.params["media"]), &media); err != nil {
		return nil, badRequest("can't parse media JSON object")
	}
	if len(media) < 2 || len(media) > 10 {
		return nil, badRequest("wrong number of media specified: 2-10 allowed")
	}
	var out []*Message
	for i, item := range media {
		if item.Type != "photo" && item.Type != "document" {
			return nil, badRequest("unsupported media type %q", item.Type)
		}
		if item.Type != media[0].Type {
			return nil, badRequest("MEDIA_GROUP_MIXED: documents can't be mixed with other media types")
		}
		u, err := upload(req, "", item.Media)
		if err != nil {
			return nil, err
		}
		text, entities, err := caption(map[string]string{"caption": item.Caption, "parse_mode": item.ParseMode}, "caption")
		if err != nil {
			return nil, err
		}
		if i == 1 {
			// Only the first replies.
			req.params = maps.Clone(req.params)
			delete(req.params, "reply_parameters")
		}
		m, err := s.postLocked(req, chat, func(m *Message) { s.fillLocked(m, item.Type, u, text, entities) })
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}
