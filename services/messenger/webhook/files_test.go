package webhook_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"mime"
	"mime/multipart"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/services/messenger/deliver"
	"github.com/heraldhq/herald/services/messenger/deliver/delivertest"
	"github.com/heraldhq/herald/services/messenger/webhook/webhooktest"
)

// spooled writes each name, data pair to a file as the messenger spools
// a notify's files.
func spooled(t *testing.T, kv ...string) []deliver.File {
	t.Helper()
	dir := t.TempDir()
	var out []deliver.File
	for i := 0; i+1 < len(kv); i += 2 {
		path := filepath.Join(dir, kv[i])
		if err := os.WriteFile(path, []byte(kv[i+1]), 0o600); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256([]byte(kv[i+1]))
		typ := "text/plain; charset=utf-8"
		if strings.HasSuffix(kv[i], ".bin") {
			typ = "application/octet-stream"
		}
		out = append(out, deliver.File{Name: kv[i], Size: int64(len(kv[i+1])), MediaType: typ, SHA256: hex.EncodeToString(sum[:]), Path: path})
	}
	return out
}

// A receiver checks a multipart webhook as it checks a JSON one: the
// Standard Webhooks signature over the raw body. One byte of a file
// changed in transit fails it.
func TestFilesAreSignedWithTheBody(t *testing.T) {
	secret := webhooktest.NewSecret()
	srv := webhooktest.NewServer(t, secret)
	s := newSender(t, secret, map[string]string{"ops": srv.URL("/ops")})
	files := spooled(t, "build.log", strings.Repeat("ok\tpkg\t0.4s\n", 500), "core.bin", "\x00\xff\r\n--not-a-boundary\r\n\x7f")
	if _, err := s.Deliver(t.Context(), deliver.Delivery{Key: key, Intent: "send", Butler: "health", Message: "see the log", Files: files}); err != nil {
		t.Fatal(err)
	}
	got := srv.Accepted()
	if len(got) != 1 {
		t.Fatalf("receiver accepted %d webhooks (%+v), want 1", len(got), srv.Requests())
	}
	req := got[0]
	sig := req.Header.Get("webhook-signature")
	if err := webhooktest.Verify(secret, req.ID, req.Timestamp, req.Body, sig, time.Now()); err != nil {
		t.Fatalf("the raw multipart body does not verify: %v", err)
	}
	checkParts(t, req, files)

	i := bytes.Index(req.Body, []byte("\x00\xff"))
	if i < 0 {
		t.Fatal("core.bin's bytes are not in the body")
	}
	tampered := bytes.Clone(req.Body)
	tampered[i] ^= 1
	if err := webhooktest.Verify(secret, req.ID, req.Timestamp, tampered, sig, time.Now()); err == nil {
		t.Error("a body with a byte of a file changed still verifies")
	}
}

// checkParts checks that a multipart webhook is the payload, then files in
// order, each named in the payload with its size and sha256.
func checkParts(t *testing.T, req webhooktest.Request, files []deliver.File) {
	t.Helper()
	mt, params, err := mime.ParseMediaType(req.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" {
		t.Fatalf("Content-Type %q, want multipart/form-data", req.Header.Get("Content-Type"))
	}
	mr := multipart.NewReader(bytes.NewReader(req.Body), params["boundary"])
	var names, types []string
	var payload struct {
		Message string           `json:"message"`
		Files   []map[string]any `json:"files"`
	}
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names, types = append(names, p.FormName()+" "+p.FileName()), append(types, p.Header.Get("Content-Type"))
		if p.FormName() == "payload" {
			if err := json.NewDecoder(p).Decode(&payload); err != nil {
				t.Fatal(err)
			}
		}
	}
	wantNames := []string{"payload ", "files[0] build.log", "files[1] core.bin"}
	wantTypes := []string{"application/json", "text/plain; charset=utf-8", "application/octet-stream"}
	if diff := cmp.Diff(wantNames, names); diff != "" {
		t.Errorf("parts (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantTypes, types); diff != "" {
		t.Errorf("part types (-want +got):\n%s", diff)
	}
	var want []map[string]any
	for i, f := range files {
		want = append(want, map[string]any{"name": f.Name, "size": float64(f.Size), "media_type": f.MediaType, "sha256": f.SHA256, "part": wantNames[i+1][:8]})
	}
	if payload.Message != "see the log" {
		t.Errorf("payload message %q", payload.Message)
	}
	if diff := cmp.Diff(want, payload.Files); diff != "" {
		t.Errorf("payload files (-want +got):\n%s", diff)
	}
	if len(req.Files) != len(files) {
		t.Errorf("the fake took %d files, want %d", len(req.Files), len(files))
	}
}

// A webhook without files is the JSON it always was, byte for byte.
func TestNoFilesIsJSON(t *testing.T) {
	secret := webhooktest.NewSecret()
	srv := webhooktest.NewServer(t, secret)
	s := newSender(t, secret, map[string]string{"ops": srv.URL("/ops")})
	if _, err := s.Deliver(t.Context(), deliver.Delivery{Key: key, Intent: "send", Butler: "health", Message: "hi"}); err != nil {
		t.Fatal(err)
	}
	req := srv.Accepted()[0]
	want := `{"type":"notify.send","delivery_id":"` + envelope.DeliveryID(key) + `","intent":"send","butler":"health","recipient":"ops","message":"hi","urgency":"normal"}`
	if string(req.Body) != want || req.Header.Get("Content-Type") != "application/json" {
		t.Errorf("body %s (%s)\nwant %s (application/json)", req.Body, req.Header.Get("Content-Type"), want)
	}
}

// A resend after a lost answer is the same webhook, files and boundary
// included, so a receiver deduplicating on webhook-id keeps one.
func TestFilesRetryIsTheSameWebhook(t *testing.T) {
	secret := webhooktest.NewSecret()
	srv := webhooktest.NewServer(t, secret)
	s := newSender(t, secret, map[string]string{"ops": srv.URL("/ops")})
	d := deliver.Delivery{Key: key, Intent: "send", Message: "once", Files: spooled(t, "a.txt", "alpha")}
	for range 2 {
		if _, err := s.Deliver(t.Context(), d); err != nil {
			t.Fatal(err)
		}
	}
	reqs := srv.Requests()
	if len(reqs) != 2 || !bytes.Equal(reqs[0].Body, reqs[1].Body) || !reqs[1].Duplicate {
		t.Fatalf("%d requests, the same body: %v, the second a duplicate: %v; want the same webhook twice",
			len(reqs), len(reqs) == 2 && bytes.Equal(reqs[0].Body, reqs[1].Body), len(reqs) == 2 && reqs[1].Duplicate)
	}
}

// A receiver's 413 is a validation_error saying how big the webhook was
// and the limit files are held to, with no secret in it.
func TestFilesTooLarge(t *testing.T) {
	secret := webhooktest.NewSecret()
	srv := webhooktest.NewServer(t, secret)
	srv.SetMaxBody(4 << 10)
	s := newSender(t, secret, map[string]string{"ops": srv.URL("/ops/s3cr3t-path-token")})
	d := deliver.Delivery{Key: key, Intent: "send", Message: "x", Files: spooled(t, "big.log", strings.Repeat("x", 64<<10))}
	_, err := s.Deliver(t.Context(), d)
	delivertest.CheckError(t, err, "validation_error", "too large", secret, strings.TrimPrefix(secret, "whsec_"), "s3cr3t-path-token")
	for _, says := range []string{"413", "1 file", "50 MB", "66 KB", "receiver's limit"} {
		if !strings.Contains(err.Error(), says) {
			t.Errorf("error %q does not say %q", err, says)
		}
	}
}

// The multipart body is written to a temp file only the messenger can
// read, there while the POST is in flight and gone after, sent or not.
func TestFilesTempFile(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	secret := webhooktest.NewSecret()
	srv := webhooktest.NewServer(t, secret)
	s := newSender(t, secret, map[string]string{"ops": srv.URL("/ops")})
	var during []os.FileMode
	srv.OnAccept(func(webhooktest.Request) {
		entries, _ := os.ReadDir(tmp)
		for _, e := range entries {
			if info, err := e.Info(); err == nil {
				during = append(during, info.Mode().Perm())
			}
		}
	})
	if _, err := s.Deliver(t.Context(), deliver.Delivery{Key: key, Intent: "send", Message: "x", Files: spooled(t, "a.txt", "alpha")}); err != nil {
		t.Fatal(err)
	}
	if len(during) != 1 || during[0] != 0o600 {
		t.Errorf("while the POST was in flight the temp dir held files of modes %v, want one of 0600", during)
	}
	srv.FailNext(500, 0)
	if _, err := s.Deliver(t.Context(), deliver.Delivery{Key: strings.Repeat("9", 64), Intent: "send", Message: "x", Files: spooled(t, "b.txt", "beta")}); err == nil {
		t.Fatal("a 500 delivered")
	}
	if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
		t.Errorf("the temp dir holds %d files after the deliveries, want none", len(entries))
	}
}

// A spooled copy that is not the file that was checked is never sent: the
// receiver would refuse it, for no fault of its own.
func TestFilesChangedOnDiskAreNotSent(t *testing.T) {
	secret := webhooktest.NewSecret()
	srv := webhooktest.NewServer(t, secret)
	s := newSender(t, secret, map[string]string{"ops": srv.URL("/ops")})
	files := spooled(t, "a.txt", "alpha")
	if err := os.WriteFile(files[0].Path, []byte("alphA"), 0o600); err != nil {
		t.Fatal(err)
	}
	began := false
	_, err := s.Deliver(t.Context(), deliver.Delivery{Key: key, Intent: "send", Message: "x", Files: files, Begin: func() error { began = true; return nil }})
	delivertest.CheckError(t, err, "internal_error", "changed")
	if began || len(srv.Requests()) != 0 {
		t.Errorf("Begin called: %v, %d requests; want neither", began, len(srv.Requests()))
	}
}
