package webhooktest_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"strings"
	"testing"

	"github.com/heraldhq/herald/services/messenger/webhook/webhooktest"
)

// part is one part of a multipart body built by hand.
type part struct {
	name, filename, typ, data string
}

// form is a multipart/form-data body of parts, and its Content-Type.
func form(t *testing.T, parts ...part) ([]byte, string) {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	for _, p := range parts {
		h := textproto.MIMEHeader{}
		if p.filename == "" {
			h.Set("Content-Disposition", fmt.Sprintf(`form-data; name=%q`, p.name))
		} else {
			h.Set("Content-Disposition", multipart.FileContentDisposition(p.name, p.filename))
		}
		h.Set("Content-Type", p.typ)
		w, err := mw.CreatePart(h)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = w.Write([]byte(p.data))
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes(), mw.FormDataContentType()
}

// payload is a payload part listing files, each given as part, name, data.
func payload(files ...string) part {
	var entries []string
	for i := 0; i+2 < len(files); i += 3 {
		sum := sha256.Sum256([]byte(files[i+2]))
		entries = append(entries, fmt.Sprintf(`{"name":%q,"size":%d,"media_type":"text/plain","sha256":%q,"part":%q}`,
			files[i+1], len(files[i+2]), hex.EncodeToString(sum[:]), files[i]))
	}
	return part{name: "payload", typ: "application/json", data: `{"message":"hi","files":[` + strings.Join(entries, ",") + `]}`}
}

func TestServerReadsMultipart(t *testing.T) {
	secret := webhooktest.NewSecret()
	srv := webhooktest.NewServer(t, secret)
	body, ct := form(t, payload("files[0]", "a.txt", "alpha", "files[1]", "b.log", "beta"),
		part{"files[0]", "a.txt", "text/plain", "alpha"}, part{"files[1]", "b.log", "text/plain; charset=utf-8", "beta"})
	resp, err := webhooktest.Post(srv.URL("/"), secret, body, webhooktest.PostOptions{Header: http.Header{"Content-Type": {ct}}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != http.StatusOK {
		t.Fatalf("status %d (%s), want 200", resp.Status, resp.Body)
	}
	r := srv.Accepted()[0]
	want := []webhooktest.File{
		{Part: "files[0]", Name: "a.txt", MediaType: "text/plain", Data: []byte("alpha")},
		{Part: "files[1]", Name: "b.log", MediaType: "text/plain; charset=utf-8", Data: []byte("beta")},
	}
	if r.Payload["message"] != "hi" || fmt.Sprint(r.Files) != fmt.Sprint(want) {
		t.Errorf("payload %v, files %+v; want message hi and %+v", r.Payload, r.Files, want)
	}
}

func TestServerRefusesMultipart(t *testing.T) {
	secret := webhooktest.NewSecret()
	srv := webhooktest.NewServer(t, secret)
	a := part{"files[0]", "a.txt", "text/plain", "alpha"}
	for _, tc := range []struct {
		name    string
		parts   []part
		problem string
	}{
		{"a file other than the payload says", []part{payload("files[0]", "a.txt", "alpha"), {"files[0]", "a.txt", "text/plain", "alphA"}}, "the payload says"},
		{"another filename", []part{payload("files[0]", "a.txt", "alpha"), {"files[0]", "b.txt", "text/plain", "alpha"}}, "the payload says"},
		{"a part the payload does not list", []part{payload(), a}, "not in the payload's files"},
		{"a part twice", []part{payload("files[0]", "a.txt", "alpha"), a, a}, "comes twice"},
		{"a part the body lacks", []part{payload("files[0]", "a.txt", "alpha")}, "lacks"},
		{"the payload not first", []part{a, payload("files[0]", "a.txt", "alpha")}, "first part"},
		{"the payload not JSON", []part{{name: "payload", typ: "application/json", data: "hi"}}, "not a JSON object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, ct := form(t, tc.parts...)
			resp, err := webhooktest.Post(srv.URL("/"), secret, body, webhooktest.PostOptions{Header: http.Header{"Content-Type": {ct}}})
			if err != nil {
				t.Fatal(err)
			}
			reqs := srv.Requests()
			if r := reqs[len(reqs)-1]; resp.Status != http.StatusBadRequest || !r.Verified || r.Files != nil || !strings.Contains(r.Problem, tc.problem) {
				t.Errorf("status %d, verified %v, files %d, problem %q; want a verified 400 saying %q", resp.Status, r.Verified, len(r.Files), r.Problem, tc.problem)
			}
		})
	}
}

func TestServerMaxBody(t *testing.T) {
	secret := webhooktest.NewSecret()
	srv := webhooktest.NewServer(t, secret)
	srv.SetMaxBody(16)
	for _, tc := range []struct {
		body string
		want int
	}{
		{`{"n":1234567890}`, http.StatusOK},
		{`{"n":12345678901}`, http.StatusRequestEntityTooLarge},
	} {
		resp, err := webhooktest.Post(srv.URL("/"), secret, []byte(tc.body), webhooktest.PostOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if resp.Status != tc.want {
			t.Errorf("%d bytes: status %d, want %d", len(tc.body), resp.Status, tc.want)
		}
	}
}
