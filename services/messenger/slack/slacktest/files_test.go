package slacktest_test

import (
	"bytes"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"
	"testing"

	"github.com/heraldhq/herald/services/messenger/slack/slacktest"
)

const form = "application/x-www-form-urlencoded"

// uploadURL asks for the upload URL of a file of length bytes.
func uploadURL(t *testing.T, srv *slacktest.Server, name, length string) answer {
	t.Helper()
	return post(t, srv, "files.getUploadURLExternal", form, "Bearer "+srv.Token(), url.Values{"filename": {name}, "length": {length}}.Encode())
}

// send posts body to an upload URL, and returns the status and body.
func send(t *testing.T, link, contentType string, body io.Reader) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, link, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestGetUploadURLExternal(t *testing.T) {
	srv := slacktest.NewServer(t)
	tests := []struct {
		name, contentType, body, code string
	}{
		{"a form", form, "filename=a.txt&length=3", ""},
		{"JSON", "application/json; charset=utf-8", `{"filename":"a.txt","length":3}`, "invalid_arguments"},
		{"no length", form, "filename=a.txt", "missing_argument"},
		{"an empty file", form, "filename=a.txt&length=0", "missing_argument"},
		{"a length that is no number", form, "filename=a.txt&length=3kb", "invalid_arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := post(t, srv, "files.getUploadURLExternal", tt.contentType, "Bearer "+srv.Token(), tt.body)
			if tt.code != "" {
				if a.ok() || a.str("error") != tt.code {
					t.Fatalf("answer %s, want %s", a.Raw, tt.code)
				}
				return
			}
			if !a.ok() || !strings.HasPrefix(a.str("upload_url"), "http") || !strings.HasPrefix(a.str("file_id"), "F") {
				t.Fatalf("answer %s, want an upload_url and a file_id", a.Raw)
			}
		})
	}
}

func TestUploadAndShare(t *testing.T) {
	srv := slacktest.NewServer(t)
	raw := uploadURL(t, srv, "a.txt", "5")
	if status, _ := send(t, raw.str("upload_url"), "application/octet-stream", strings.NewReader("four")); status != http.StatusBadRequest {
		t.Errorf("an upload short of its length: %d, want 400", status)
	}
	if status, body := send(t, raw.str("upload_url"), "application/octet-stream", strings.NewReader("five!")); status != http.StatusOK || body != "OK - 5" {
		t.Fatalf("raw upload: %d %q, want 200 OK - 5", status, body)
	}
	multi := uploadURL(t, srv, "b.csv", "4")
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	pw, _ := mw.CreatePart(textproto.MIMEHeader{"Content-Disposition": {`form-data; name="file"; filename="b.csv"`}, "Content-Type": {"text/csv"}})
	_, _ = pw.Write([]byte("a,b\n"))
	_ = mw.Close()
	if status, _ := send(t, multi.str("upload_url"), mw.FormDataContentType(), &body); status != http.StatusOK {
		t.Fatalf("multipart upload: %d, want 200", status)
	}

	files := []map[string]string{{"id": raw.str("file_id"), "title": "A"}, {"id": multi.str("file_id")}}
	a := postJSON(t, srv, "files.completeUploadExternal", map[string]any{"files": files, "channel_id": "C0GENERAL", "initial_comment": "two *files*"})
	if !a.ok() || len(a.Body["files"].([]any)) != 2 {
		t.Fatalf("complete: %s, want both files", a.Raw)
	}
	if again := postJSON(t, srv, "files.completeUploadExternal", map[string]any{"files": files, "channel_id": "C0GENERAL"}); again.str("error") != "file_not_found" {
		t.Errorf("a second share of the files: %s, want file_not_found", again.Raw)
	}
	shares := srv.Shares()
	if len(shares) != 1 {
		t.Fatalf("%d shares, want 1", len(shares))
	}
	sh := shares[0]
	if sh.InitialComment != "two *files*" || sh.Files[0].Title != "A" || string(sh.Files[0].Data) != "five!" || sh.Files[0].MediaType != "" ||
		sh.Files[1].Name != "b.csv" || string(sh.Files[1].Data) != "a,b\n" || sh.Files[1].MediaType != "text/csv" {
		t.Errorf("share %+v, want both files as uploaded with the comment", sh)
	}
	if m, ok := srv.Message("C0GENERAL", sh.TS); !ok || m.Text != "two *files*" || len(m.Files) != 2 || m.BotID != srv.BotID() {
		t.Errorf("message %+v, want the app's, with the comment and the files", m)
	}
}

func TestUploadLimits(t *testing.T) {
	srv := slacktest.NewServer(t)
	srv.LimitUploads(4)
	if a := uploadURL(t, srv, "big.bin", "5"); a.str("error") != "file_upload_size_restricted" {
		t.Errorf("a file over the limit: %s, want file_upload_size_restricted", a.Raw)
	}
	a := uploadURL(t, srv, "small.bin", "4")
	if status, _ := send(t, a.str("upload_url"), "application/octet-stream", strings.NewReader("five!")); status != http.StatusRequestEntityTooLarge {
		t.Errorf("a body over the limit: %d, want 413", status)
	}
	srv.FailHTTPNext("upload", 1, http.StatusServiceUnavailable)
	if status, _ := send(t, a.str("upload_url"), "application/octet-stream", strings.NewReader("four")); status != http.StatusServiceUnavailable {
		t.Errorf("an injected fault: %d, want 503", status)
	}
}

func TestFilesInfoAndDownload(t *testing.T) {
	srv := slacktest.NewServer(t)
	f := srv.AddFile("labs.pdf", "application/pdf", []byte("%PDF-1.7"))
	info := func(id string) (answer, map[string]any) {
		a := post(t, srv, "files.info", form, "Bearer "+srv.Token(), url.Values{"file": {id}}.Encode())
		file, _ := a.Body["file"].(map[string]any)
		return a, file
	}
	get := func(link, auth string) (int, string) {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, link, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultTransport.RoundTrip(req) // no redirect followed
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	a, file := info(f.ID)
	link, _ := file["url_private_download"].(string)
	if !a.ok() || file["name"] != "labs.pdf" || link == "" {
		t.Fatalf("files.info: %s, want the file with its download link", a.Raw)
	}
	if status, body := get(link, "Bearer "+srv.Token()); status != http.StatusOK || body != "%PDF-1.7" {
		t.Errorf("download with the token: %d %q, want the file", status, body)
	}
	if status, _ := get(link, ""); status != http.StatusFound {
		t.Errorf("download without a token: %d, want 302 to the sign-in page", status)
	}
	srv.DeleteFile(f.ID)
	if a, _ := info(f.ID); a.str("error") != "file_deleted" {
		t.Errorf("files.info of a deleted file: %s, want file_deleted", a.Raw)
	}
	if status, _ := get(link, "Bearer "+srv.Token()); status != http.StatusNotFound {
		t.Errorf("download of a deleted file: %d, want 404", status)
	}
	ext := srv.ExternalFile("plan.doc", "https://drive.example/plan")
	if _, file := info(ext.ID); file["url_private"] != "https://drive.example/plan" || file["url_private_download"] != nil || file["is_external"] != true {
		t.Errorf("files.info of an external file: %v, want its own link and no download", file)
	}
	if a, _ := info("F0NOSUCH"); a.str("error") != "file_not_found" {
		t.Errorf("files.info of no file: %s, want file_not_found", a.Raw)
	}
}
