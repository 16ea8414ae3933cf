package delivertest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/heraldhq/herald/services/messenger/deliver"
)

// Upload is one file as the provider took it (Files).
type Upload struct {
	Name string
	// MediaType is the type the wire gave the file; "" where it carries
	// none (the provider tells it from the bytes).
	MediaType string
	Data      []byte
	// Caption is the text the provider took with this file where that is
	// apart from a message (Telegram's caption, Slack's initial_comment);
	// where the message and its files are one provider message (Discord,
	// email, a webhook), the text is in Delivered and Caption is "".
	Caption string
}

// Fixture files: a real PNG and a text log.
func fixtureFiles(t *testing.T) []deliver.File {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 64, 48))
	for x := range 64 {
		img.Set(x, x%48, color.RGBA{R: 200, A: 255})
	}
	var chart bytes.Buffer
	if err := png.Encode(&chart, img); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var out []deliver.File
	for _, f := range []struct {
		name, typ string
		data      []byte
	}{
		{"chart.png", "image/png", chart.Bytes()},
		{"build.log", "text/plain; charset=utf-8", []byte(strings.Repeat("ok  \tgithub.com/heraldhq/herald/pkg\t0.4s\n", 200))},
	} {
		path := filepath.Join(dir, f.name)
		if err := os.WriteFile(path, f.data, 0o600); err != nil {
			t.Fatal(err)
		}
		out = append(out, deliver.File{Name: f.name, Size: int64(len(f.data)), MediaType: f.typ, SHA256: sha256Hex(f.data), Path: path})
	}
	return out
}

// runFiles: a delivery's files reach the provider, bytes, names and types
// as sent, with the message once; a retry of a delivery done sends no file
// again; a failing Begin sends none (Files).
func runFiles(t *testing.T, h Harness) {
	if lacks(t, h.Features.Files, "Files", "the channel carries no files") {
		return
	}
	const text = "the chart and its build log"
	t.Run("files reach the provider with the message", func(t *testing.T) {
		s := h.New(t)
		files := fixtureFiles(t)
		d := send(31, text, nil)
		d.Files = files
		r, err := s.Deliver(t.Context(), d)
		if err != nil {
			t.Fatalf("deliver: %v", err)
		}
		if len(r.MessageIDs) == 0 {
			t.Fatal("no receipt for a delivery with files")
		}
		got := h.Uploaded(t)
		if len(got) != len(files) {
			t.Fatalf("provider took %d files, want %d", len(got), len(files))
		}
		for i, f := range files {
			want, _ := os.ReadFile(f.Path)
			u := got[i]
			if u.Name != f.Name || !bytes.Equal(u.Data, want) {
				t.Errorf("file %d: %q, %d bytes; want %q, %d bytes as sent", i+1, u.Name, len(u.Data), f.Name, len(want))
			}
			if base, _, _ := strings.Cut(f.MediaType, ";"); u.MediaType != "" && !strings.HasPrefix(u.MediaType, base) {
				t.Errorf("file %d: media type %q, want %q", i+1, u.MediaType, f.MediaType)
			}
		}
		seen := 0
		for _, m := range h.Delivered(t) {
			seen += strings.Count(m, text)
		}
		for _, u := range got {
			seen += strings.Count(u.Caption, text)
		}
		if seen != 1 {
			t.Errorf("the message reached the provider %d times (messages %q, uploads %+v), want once", seen, h.Delivered(t), captions(got))
		}
	})

	t.Run("a retry after the files were sent sends none again", func(t *testing.T) {
		s := h.New(t)
		d := send(32, text, nil)
		d.Files = fixtureFiles(t)
		first, err := s.Deliver(t.Context(), d)
		if err != nil {
			t.Fatal(err)
		}
		d.Done = first.MessageIDs
		again, err := s.Deliver(t.Context(), d)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(h.Uploaded(t)); n != len(d.Files) {
			t.Fatalf("provider took %d files, want %d", n, len(d.Files))
		}
		if !slices.Equal(again.MessageIDs, first.MessageIDs) {
			t.Fatalf("retry receipt %v, want %v", again.MessageIDs, first.MessageIDs)
		}
	})

	t.Run("a failing Begin sends no file", func(t *testing.T) {
		s := h.New(t)
		stop := errors.New("ledger down")
		d := send(33, text, nil)
		d.Files = fixtureFiles(t)
		d.Begin = func() error { return stop }
		if _, err := s.Deliver(t.Context(), d); !errors.Is(err, stop) {
			t.Fatalf("deliver: %v, want Begin's error", err)
		}
		if got := h.Uploaded(t); len(got) != 0 {
			t.Fatalf("provider took %d files after Begin failed", len(got))
		}
	})
}

func captions(us []Upload) []string {
	var out []string
	for _, u := range us {
		out = append(out, u.Name+": "+u.Caption)
	}
	return out
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
