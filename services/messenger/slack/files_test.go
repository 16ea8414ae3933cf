package slack_test

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/services/messenger/deliver"
	"github.com/heraldhq/herald/services/messenger/deliver/delivertest"
	"github.com/heraldhq/herald/services/messenger/slack"
	"github.com/heraldhq/herald/services/messenger/slack/slacktest"
)

// spooled is a delivery's file as the messenger spools it.
func spooled(t *testing.T, name string, data []byte) deliver.File {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return deliver.File{Name: name, Size: int64(len(data)), MediaType: "text/plain; charset=utf-8", Path: path}
}

// onlyShare is the one share srv carried out.
func onlyShare(t *testing.T, srv *slacktest.Server) slacktest.Share {
	t.Helper()
	shares := srv.Shares()
	if len(shares) != 1 {
		t.Fatalf("%d shares, want 1: %+v", len(shares), shares)
	}
	return shares[0]
}

func TestFilesWire(t *testing.T) {
	srv := slacktest.NewServer(t)
	s := newSender(t, srv, srv.Token())
	d := deliver.Delivery{Intent: envelope.IntentSend, Recipient: "C0GENERAL", Butler: "health", Subject: "Labs", Message: "the **results**",
		Files: []deliver.File{spooled(t, "labs.txt", []byte("ldl 90\n")), spooled(t, "notes.txt", []byte("fast 12h\n"))}}
	r, err := s.Deliver(t.Context(), d)
	if err != nil {
		t.Fatal(err)
	}
	sh := onlyShare(t, srv)
	if len(r.MessageIDs) != 1 || r.MessageIDs[0] != sh.Files[0].ID {
		t.Errorf("receipt %v, want the first file's id %s", r.MessageIDs, sh.Files[0].ID)
	}
	if want := "*Labs*\nthe *results*\n— health"; sh.InitialComment != want || len(srv.Accepted("chat.postMessage")) != 0 {
		t.Errorf("initial_comment %q and %d messages, want %q alone", sh.InitialComment, len(srv.Accepted("chat.postMessage")), want)
	}
	for _, c := range srv.Calls("files.getUploadURLExternal") {
		if c.ContentType != "application/x-www-form-urlencoded" || c.TokenIn != "header" {
			t.Errorf("getUploadURLExternal as %s with the token in %q, want a form with the token in the header", c.ContentType, c.TokenIn)
		}
	}
	for _, c := range srv.Calls("upload") {
		if c.Token != srv.Token() || !c.OK() {
			t.Errorf("upload %+v, want it taken, with the bot token", c)
		}
	}
	if n := len(srv.Calls("files.completeUploadExternal")); n != 1 {
		t.Errorf("%d completeUploadExternal calls, want one for both files", n)
	}
}

func TestFilesInThread(t *testing.T) {
	srv := slacktest.NewServer(t)
	s := newSender(t, srv, srv.Token())
	root := srv.UserMessage(slacktest.MessageEvent{Channel: "C0GENERAL", Text: "send me the chart"})
	_, err := s.Deliver(t.Context(), deliver.Delivery{Intent: envelope.IntentReply, Thread: "C0GENERAL:" + root.Event.TS, Message: "here it is",
		Files: []deliver.File{spooled(t, "chart.txt", []byte("▁▂▃▅▇"))}})
	if err != nil {
		t.Fatal(err)
	}
	sh := onlyShare(t, srv)
	if sh.Channel != "C0GENERAL" || sh.ThreadTS != root.Event.TS {
		t.Fatalf("files shared in %s thread %q, want C0GENERAL thread %s", sh.Channel, sh.ThreadTS, root.Event.TS)
	}
	if m, ok := srv.Message("C0GENERAL", sh.TS); !ok || m.ThreadTS != root.Event.TS || len(m.Files) != 1 {
		t.Errorf("the share's message %+v, want it in the thread with the file", m)
	}
}

func TestFilesAfterText(t *testing.T) {
	long := delivertest.Paragraphs(480)(3)
	tests := []struct {
		name, recipient, message string
		// shareIn is where the files go: the conversation Slack named
		// for the text.
		shareIn string
	}{
		{"a long message", "C0GENERAL", long, "C0GENERAL"},
		{"a person, by user id", "U0HUMAN01", "short", "D0HUMAN01"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := slacktest.NewServer(t)
			s := newSender(t, srv, srv.Token())
			d := deliver.Delivery{Intent: envelope.IntentSend, Recipient: tt.recipient, Message: tt.message,
				Files: []deliver.File{spooled(t, "build.log", []byte("ok\n"))}}
			srv.FailNext("files.completeUploadExternal", 1, "internal_error")
			first, err := s.Deliver(t.Context(), d)
			if !errors.Is(err, envelope.ErrTargetUnavailable) {
				t.Fatalf("first attempt: %v, want the share's failure", err)
			}
			texts := len(srv.Accepted("chat.postMessage"))
			if texts == 0 || len(first.MessageIDs) != texts {
				t.Fatalf("first attempt sent %d messages with receipt %v, want the text before the files", texts, first.MessageIDs)
			}
			d.Done = first.MessageIDs
			again, err := s.Deliver(t.Context(), d)
			if err != nil {
				t.Fatal(err)
			}
			sh := onlyShare(t, srv)
			posts := srv.Accepted("chat.postMessage")
			switch {
			case len(posts) != texts:
				t.Errorf("the retry posted the text again: %d messages, want %d", len(posts), texts)
			case sh.InitialComment != "" || sh.Channel != tt.shareIn:
				t.Errorf("share in %s with comment %q, want in %s without one", sh.Channel, sh.InitialComment, tt.shareIn)
			case len(again.MessageIDs) != texts+1 || again.MessageIDs[texts] != sh.Files[0].ID:
				t.Errorf("receipt %v, want the %d messages and the file", again.MessageIDs, texts)
			}
		})
	}
}

func TestFilesTooBig(t *testing.T) {
	limit := bus.Bytes(slack.MaxFileSize)
	tests := []struct {
		name  string
		fault func(*slacktest.Server)
	}{
		{"the workspace restricts uploads", func(srv *slacktest.Server) { srv.LimitUploads(4) }},
		{"the upload answers 413", func(srv *slacktest.Server) { srv.FailHTTPNext("upload", 1, http.StatusRequestEntityTooLarge) }},
		{"the Web API answers 413", func(srv *slacktest.Server) {
			srv.FailHTTPNext("files.completeUploadExternal", 1, http.StatusRequestEntityTooLarge)
		}},
		{"Slack says file_too_large", func(srv *slacktest.Server) { srv.FailNext("files.getUploadURLExternal", 1, "file_too_large") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := slacktest.NewServer(t)
			s := newSender(t, srv, srv.Token())
			tt.fault(srv)
			_, err := s.Deliver(t.Context(), deliver.Delivery{Intent: envelope.IntentSend, Message: "the export",
				Files: []deliver.File{spooled(t, "export.csv", []byte("a,b\n1,2\n"))}})
			if !errors.Is(err, envelope.ErrValidation) || !strings.Contains(err.Error(), limit) {
				t.Fatalf("deliver: %v, want a validation error naming Slack's limit of %s", err, limit)
			}
			if strings.Contains(err.Error(), srv.Token()) {
				t.Errorf("the error holds the token: %v", err)
			}
			if n := len(srv.Shares()); n != 0 {
				t.Errorf("%d shares of a refused file", n)
			}
		})
	}
}

func TestFetch(t *testing.T) {
	var elsewhere atomic.Int32 // requests to a host that is not Slack's
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { elsewhere.Add(1) }))
	t.Cleanup(other.Close)
	data := bytes.Repeat([]byte("%PDF-1.7 labs "), 1000)
	tests := []struct {
		name string
		file func(*slacktest.Server) envelope.Attachment
		want error // nil: the file's bytes
	}{
		{"a file a person shared", func(srv *slacktest.Server) envelope.Attachment {
			return attachmentOf(srv.AddFile("labs.pdf", "application/pdf", data))
		}, nil},
		{"a file kept on another host", func(srv *slacktest.Server) envelope.Attachment {
			return attachmentOf(srv.ExternalFile("labs.pdf", other.URL+"/labs.pdf"))
		}, envelope.ErrValidation},
		{"a deleted file", func(srv *slacktest.Server) envelope.Attachment {
			f := srv.AddFile("labs.pdf", "application/pdf", data)
			srv.DeleteFile(f.ID)
			return attachmentOf(f)
		}, envelope.ErrNotFound},
		{"over Slack's limit", func(srv *slacktest.Server) envelope.Attachment {
			a := attachmentOf(srv.AddFile("huge.bin", "application/octet-stream", data))
			a.Size = slack.MaxFileSize + 1
			return a
		}, envelope.ErrValidation},
		{"a ref that is not Slack's", func(*slacktest.Server) envelope.Attachment {
			return envelope.Attachment{Name: "x", Ref: "telegram:file:AgAC"}
		}, envelope.ErrValidation},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := slacktest.NewServer(t)
			s := newSender(t, srv, srv.Token()).(deliver.Fetcher)
			var got bytes.Buffer
			err := s.Fetch(t.Context(), tt.file(srv), &got)
			if tt.want != nil {
				if !errors.Is(err, tt.want) {
					t.Fatalf("fetch: %v, want %v", err, tt.want)
				}
				if elsewhere.Load() != 0 {
					t.Fatal("Fetch sent a request to a host that is not Slack's")
				}
				return
			}
			if err != nil || !bytes.Equal(got.Bytes(), data) {
				t.Fatalf("fetch: %v, %d bytes; want the file's %d", err, got.Len(), len(data))
			}
			if d := srv.Calls("download"); len(d) != 1 || d[0].Token != srv.Token() || d[0].TokenIn != "header" {
				t.Errorf("downloads %+v, want one with the bot token in the header", d)
			}
		})
	}
}

// attachmentOf is f as the ingress describes it.
func attachmentOf(f slacktest.File) envelope.Attachment {
	return deliver.Attachment(f.Name, f.Mimetype, f.Size, "slack:file:"+f.ID)
}
