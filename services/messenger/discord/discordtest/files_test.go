package discordtest_test

import (
	"bytes"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"strings"
	"testing"

	"github.com/heraldhq/herald/services/messenger/discord/discordtest"
)

// part is one file part of a multipart post.
type part struct{ field, name, contentType, data string }

// postForm posts payload as payload_json with files, as a bot uploads.
func postForm(t *testing.T, srv *discordtest.Server, channel string, payload any, files ...part) answer {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	j, _ := json.Marshal(payload)
	pw, _ := mw.CreatePart(textproto.MIMEHeader{"Content-Disposition": {`form-data; name="payload_json"`}, "Content-Type": {"application/json"}})
	_, _ = pw.Write(j)
	for _, f := range files {
		fw, _ := mw.CreatePart(textproto.MIMEHeader{"Content-Disposition": {multipart.FileContentDisposition(f.field, f.name)}, "Content-Type": {f.contentType}})
		_, _ = io.WriteString(fw, f.data)
	}
	_ = mw.Close()
	req, _ := http.NewRequestWithContext(t.Context(), "POST", srv.URL()+"/channels/"+channel+"/messages", &body)
	req.Header.Set("Authorization", "Bot "+srv.Token())
	req.Header.Set("Content-Type", mw.FormDataContentType())
	return do(t, req)
}

func do(t *testing.T, req *http.Request) answer {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := answer{Status: resp.StatusCode, Header: resp.Header, Raw: string(raw)}
	_ = json.Unmarshal(raw, &a.Body)
	return a
}

// download GETs a CDN link as a browser would: no token.
func download(t *testing.T, link string) (int, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", link, nil)
	a := do(t, req)
	return a.Status, a.Raw
}

// TestUploads: a multipart post keeps its files as the message's
// attachments, served from signed CDN links until they expire; fetching
// the message again gives fresh links.
func TestUploads(t *testing.T) {
	srv := discordtest.NewServer(t)
	a := postForm(t, srv, discordtest.ChannelGeneral,
		map[string]any{"content": "logs", "attachments": []any{map[string]any{"id": 0, "filename": "build.log"}}},
		part{"files[0]", "build.log", "text/plain", "ok\n"})
	if a.Status != 200 {
		t.Fatalf("answer %d %s", a.Status, a.Raw)
	}
	atts, _ := a.Body["attachments"].([]any)
	if len(atts) != 1 {
		t.Fatalf("attachments %v, want the file", a.Body["attachments"])
	}
	att, _ := atts[0].(map[string]any)
	link, _ := att["url"].(string)
	if att["filename"] != "build.log" || att["size"] != float64(3) || !strings.Contains(link, "/attachments/"+discordtest.ChannelGeneral+"/") || !strings.Contains(link, "&hm=") {
		t.Errorf("attachment %v", att)
	}
	if ups := srv.Uploads(); len(ups) != 1 || ups[0].Name != "build.log" || ups[0].ContentType != "text/plain" || string(ups[0].Data) != "ok\n" {
		t.Errorf("uploads %+v", ups)
	}
	if c := srv.Calls(discordtest.RouteCreateMessage)[0]; c.Create.Content != "logs" {
		t.Errorf("payload_json read as %+v", c.Create)
	}
	if status, body := download(t, link); status != 200 || body != "ok\n" {
		t.Errorf("download: %d %q", status, body)
	}

	srv.ExpireLinks()
	if status, body := download(t, link); status != 404 || body != "This content is no longer available." {
		t.Errorf("expired link: %d %q, want 404", status, body)
	}
	id, _ := a.Body["id"].(string)
	m := call(t, srv, "GET", "/channels/"+discordtest.ChannelGeneral+"/messages/"+id, "Bot "+srv.Token(), nil)
	atts, _ = m.Body["attachments"].([]any)
	if len(atts) != 1 {
		t.Fatalf("GET message: %d %s", m.Status, m.Raw)
	}
	fresh, _ := atts[0].(map[string]any)["url"].(string)
	if status, body := download(t, fresh); fresh == link || status != 200 || body != "ok\n" {
		t.Errorf("fresh link %q: %d %q", fresh, status, body)
	}
}

// TestUploadRefusals: what Discord refuses of a multipart post.
func TestUploadRefusals(t *testing.T) {
	file := part{"files[0]", "a.bin", "application/octet-stream", strings.Repeat("x", 2048)}
	tests := []struct {
		name    string
		payload map[string]any
		limit   int64
		status  int
		code    int
	}{
		{"an attachment without its part", map[string]any{"content": "x", "attachments": []any{map[string]any{"id": 1}}}, 0, 400, 50035},
		{"a file over the limit", map[string]any{"content": "x"}, 1024, 413, 40005},
		{"files alone", map[string]any{}, 0, 200, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := discordtest.NewServer(t)
			if tt.limit > 0 {
				srv.SetFileLimit(tt.limit)
			}
			a := postForm(t, srv, discordtest.ChannelGeneral, tt.payload, file)
			if a.Status != tt.status || a.code() != tt.code {
				t.Errorf("answer %d %s, want %d with code %d", a.Status, a.Raw, tt.status, tt.code)
			}
			if tt.status != 200 && len(srv.Uploads()) != 0 {
				t.Errorf("a refused post kept %d files", len(srv.Uploads()))
			}
		})
	}
}
