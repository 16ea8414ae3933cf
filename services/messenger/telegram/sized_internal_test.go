package telegram

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestSizedBodies: a body written through a pipe, as go-telegram/bot writes
// every form, reaches the Bot API whole; a small one with its length and not
// chunked, a large one (a file) streamed; a form that fails to build fails
// the call.
func TestSizedBodies(t *testing.T) {
	type got struct {
		length  int64
		chunked bool
		body    []byte
	}
	seen := make(chan got, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		seen <- got{r.ContentLength, len(r.TransferEncoding) > 0 && r.TransferEncoding[0] == "chunked", b}
	}))
	defer srv.Close()
	c := sizedBodies{srv.Client()}
	post := func(write func(w *io.PipeWriter)) (*http.Response, error) {
		pr, pw := io.Pipe()
		go write(pw)
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL, pr)
		if err != nil {
			t.Fatal(err)
		}
		return c.Do(req)
	}
	for _, size := range []int{1200, maxSizedBody, maxSizedBody + 1, 3 * maxSizedBody} {
		want := []byte(strings.Repeat("a form field ", size/13+1)[:size])
		resp, err := post(func(w *io.PipeWriter) {
			for b := want; len(b) > 0; b = b[min(len(b), 100):] { // many small writes, as a form is built
				if _, err := w.Write(b[:min(len(b), 100)]); err != nil {
					return
				}
			}
			_ = w.Close()
		})
		if err != nil {
			t.Fatalf("%d bytes: %v", size, err)
		}
		_ = resp.Body.Close()
		g := <-seen
		if !bytes.Equal(g.body, want) {
			t.Fatalf("%d bytes: the server got %d bytes, not the body sent", size, len(g.body))
		}
		if small := size <= maxSizedBody; small && (g.chunked || g.length != int64(size)) {
			t.Errorf("%d bytes: sent chunked=%v with Content-Length %d; want its length and not chunked", size, g.chunked, g.length)
		} else if !small && !g.chunked {
			t.Errorf("%d bytes: over %d, want it streamed (chunked), got Content-Length %d", size, maxSizedBody, g.length)
		}
	}
	broken := errors.New("form field 3 could not be encoded")
	if _, err := post(func(w *io.PipeWriter) { _, _ = w.Write([]byte("--boundary")); w.CloseWithError(broken) }); !errors.Is(err, broken) {
		t.Errorf("a form that failed to build: err %v, want %v", err, broken)
	}
}
