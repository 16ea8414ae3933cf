package discord_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/services/messenger/deliver"
	"github.com/heraldhq/herald/services/messenger/deliver/delivertest"
	"github.com/heraldhq/herald/services/messenger/discord/discordtest"
)

// spooled is a delivery's file holding data, as the messenger spools it.
func spooled(t *testing.T, name, mediaType string, data []byte) deliver.File {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return deliver.File{Name: name, Size: int64(len(data)), MediaType: mediaType, Path: path}
}

// TestReplyWithFiles: a reply's files go in the message that replies, one
// multipart post whose payload_json names each part and keeps the
// reference; a long reply's files go with its last chunk, the first
// replying.
func TestReplyWithFiles(t *testing.T) {
	srv := discordtest.NewServer(t)
	asked := srv.UserMessage(discordtest.MessageOptions{Content: "the logs?"})
	files := []deliver.File{
		spooled(t, "build.log", "text/plain; charset=utf-8", []byte("ok\n")),
		spooled(t, `Q3 "final".csv`, "text/csv", []byte("a,b\n1,2\n")),
	}
	reply := deliver.Delivery{Intent: "reply", Thread: asked.ChannelID + ":" + asked.ID, Message: "here they are", Files: files}

	t.Run("one message", func(t *testing.T) {
		before := len(posted(srv))
		if _, err := newSender(t, srv, srv.Token()).Deliver(t.Context(), reply); err != nil {
			t.Fatal(err)
		}
		calls := posted(srv)[before:]
		if len(calls) != 1 {
			t.Fatalf("%d posts, want the reply and its files in one", len(calls))
		}
		c := calls[0]
		if !strings.HasPrefix(c.ContentType, "multipart/form-data; boundary=") {
			t.Errorf("Content-Type %q, want multipart/form-data", c.ContentType)
		}
		if ref := c.Create.MessageReference; ref == nil || ref.MessageID != asked.ID {
			t.Errorf("message_reference %+v, want the message answered", ref)
		}
		if c.Create.Content != "here they are" || !c.Create.AllowedMentions.RepliedUser {
			t.Errorf("content %q, allowed_mentions %+v", c.Create.Content, c.Create.AllowedMentions)
		}
		var payload struct {
			Attachments []struct {
				ID       int    `json:"id"`
				Filename string `json:"filename"`
			} `json:"attachments"`
		}
		if err := json.Unmarshal(c.Body, &payload); err != nil || len(payload.Attachments) != 2 || payload.Attachments[1].ID != 1 || payload.Attachments[1].Filename != files[1].Name {
			t.Errorf("payload_json attachments %+v (%v), want files[0] and files[1] by name", payload.Attachments, err)
		}
		for i, f := range files {
			want, _ := os.ReadFile(f.Path)
			if u := c.Files[i]; u.Name != f.Name || u.ContentType != f.MediaType || !bytes.Equal(u.Data, want) {
				t.Errorf("file %d: %q %q %q, want %q %q %q", i, u.Name, u.ContentType, u.Data, f.Name, f.MediaType, want)
			}
		}
		if m, _ := srv.Message(c.Channel, c.Message); m.Type != discordtest.MessageReply || len(m.Attachments) != 2 {
			t.Errorf("Discord holds type %d with %d attachments, want a reply with both files", m.Type, len(m.Attachments))
		}
	})

	t.Run("a long message", func(t *testing.T) {
		before := len(posted(srv))
		long := reply
		long.Message = delivertest.Paragraphs(240)(3)
		if _, err := newSender(t, srv, srv.Token()).Deliver(t.Context(), long); err != nil {
			t.Fatal(err)
		}
		calls := posted(srv)[before:]
		if len(calls) < 2 {
			t.Fatalf("%d posts, want the message in chunks", len(calls))
		}
		for i, c := range calls {
			last := i == len(calls)-1
			if (len(c.Files) > 0) != last || (c.Create.MessageReference != nil) != (i == 0) {
				t.Errorf("chunk %d of %d: %d files, reference %+v; want the files on the last, the reference on the first", i+1, len(calls), len(c.Files), c.Create.MessageReference)
			}
		}
	})
}

// TestFilesAfterARateLimit: a 429 waited out sends the files again,
// whole: each try reads them afresh.
func TestFilesAfterARateLimit(t *testing.T) {
	srv := discordtest.NewServer(t)
	srv.RateLimitNext(discordtest.RouteCreateMessage, 1, 50*time.Millisecond, false)
	data := bytes.Repeat([]byte("log line\n"), 1000)
	d := deliver.Delivery{Message: "the log", Files: []deliver.File{spooled(t, "build.log", "text/plain", data)}}
	if _, err := newSender(t, srv, srv.Token()).Deliver(t.Context(), d); err != nil {
		t.Fatal(err)
	}
	if ups := srv.Uploads(); len(ups) != 1 || !bytes.Equal(ups[0].Data, data) {
		t.Fatalf("Discord took %d files, want the log whole after the 429", len(ups))
	}
}

// TestFilesTooLarge: Discord's 413 (its JSON 40005, or Cloudflare's page)
// is a validation error naming the limit of a server without boosts.
func TestFilesTooLarge(t *testing.T) {
	tests := []struct {
		name  string
		fault func(*discordtest.Server)
	}{
		{"over the server's limit", func(s *discordtest.Server) { s.SetFileLimit(1 << 10) }},
		{"Cloudflare's page", func(s *discordtest.Server) { s.FailHTTPNext(discordtest.RouteCreateMessage, 1, 413) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := discordtest.NewServer(t)
			tt.fault(srv)
			d := deliver.Delivery{Message: "the dump", Files: []deliver.File{spooled(t, "heap.bin", "application/octet-stream", bytes.Repeat([]byte{7}, 2<<10))}}
			_, err := newSender(t, srv, srv.Token()).Deliver(t.Context(), d)
			delivertest.CheckError(t, err, "validation_error", "10 MB", srv.Token())
			if n := len(posted(srv)); n != 0 {
				t.Errorf("Discord took %d messages", n)
			}
		})
	}
}

// received is the attachment of a message a person wrote with a file, as
// the receiver turned it into an ingress.
func received(t *testing.T, srv *discordtest.Server, data []byte) envelope.Attachment {
	t.Helper()
	sink := start(t, srv, newReceiver(t, srv, recv{}))
	att := srv.NewAttachment(discordtest.ChannelGeneral, "disk.png", "image/png", data)
	srv.UserMessage(discordtest.MessageOptions{Content: "<@" + discordtest.BotID + "> look", Attachments: []discordtest.Attachment{att}})
	in := sink.WaitStored(t, 1)[0]
	if len(in.Attachments) != 1 {
		t.Fatalf("ingress attachments %+v, want the one file", in.Attachments)
	}
	return in.Attachments[0]
}

// fetch is the sender's Fetch of a, and what it wrote.
func fetch(t *testing.T, s deliver.Sender, a envelope.Attachment) ([]byte, error) {
	t.Helper()
	f, ok := s.(deliver.Fetcher)
	if !ok {
		t.Fatalf("%T is not a deliver.Fetcher", s)
	}
	var buf bytes.Buffer
	err := f.Fetch(t.Context(), a, &buf)
	return buf.Bytes(), err
}

// TestFetch: a person's file is downloaded from the CDN without the
// token, and again once its link expired (the message fetched for a fresh
// one); a link to another host is refused without a request.
func TestFetch(t *testing.T) {
	srv := discordtest.NewServer(t)
	data := bytes.Repeat([]byte("png."), 5000)
	a := received(t, srv, data)
	s := newSender(t, srv, srv.Token())

	got, err := fetch(t, s, a)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("fetch: %d bytes, %v; want the file's %d", len(got), err, len(data))
	}
	for _, c := range srv.Calls(discordtest.RouteCDN) {
		if c.Authorization != "" {
			t.Errorf("the CDN got Authorization %q, want no token sent there", c.Authorization)
		}
	}

	t.Run("an expired link is renewed", func(t *testing.T) {
		srv.ExpireLinks()
		got, err := fetch(t, s, a)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("fetch: %d bytes, %v; want the file again", len(got), err)
		}
		if n := len(srv.Accepted(discordtest.RouteGetMessage)); n != 1 {
			t.Errorf("message fetched %d times, want once for a fresh link", n)
		}
	})

	t.Run("an expired link of no known message", func(t *testing.T) {
		srv.ExpireLinks()
		bare := a
		bare.Ref, _, _ = strings.Cut(a.Ref, "#")
		_, err := fetch(t, s, bare)
		delivertest.CheckError(t, err, "not_found", "send it again")
	})

	t.Run("more than Discord announced", func(t *testing.T) {
		small := a
		small.Size = 100
		_, err := fetch(t, s, small)
		delivertest.CheckError(t, err, "validation_error", "more of disk.png than the 100 B")
	})

	t.Run("a link to another host", func(t *testing.T) {
		elsewhere := delivertest.NewMoved(t)
		for _, ref := range []string{
			elsewhere.Target.URL + "/attachments/1/2/disk.png",
			"http://cdn.discordapp.com/attachments/1/2/disk.png", // not https
			"https://cdn.discordapp.com.evil.example/attachments/1/2/disk.png",
			"http://169.254.169.254/latest/meta-data/",
		} {
			other := a
			other.Ref = ref
			_, err := fetch(t, s, other)
			delivertest.CheckError(t, err, "validation_error", "is not a link to Discord's CDN")
			if n := elsewhere.Followed(); n != 0 {
				t.Fatalf("the other host got %d requests", n)
			}
		}
	})
}
