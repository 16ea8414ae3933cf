package telegramtest

import (
	"net/http"
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
