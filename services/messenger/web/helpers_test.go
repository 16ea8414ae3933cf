package web_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/cookiejar"
	"net/textproto"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/services/messenger/deliver"
	"github.com/heraldhq/herald/services/messenger/web"
)

// wait bounds every wait for something that should happen at once; it is a
// guard against hanging, never a measurement.
const wait = 15 * time.Second

// sink records what the channel hands to the messenger.
type sink struct {
	ingress chan *envelope.Ingress
	status  chan deliver.Status

	mu   sync.Mutex
	fail error
}

func newSink() *sink {
	return &sink{ingress: make(chan *envelope.Ingress, 100), status: make(chan deliver.Status, 100)}
}

func (s *sink) Ingress(_ context.Context, in *envelope.Ingress) error {
	s.mu.Lock()
	err := s.fail
	s.mu.Unlock()
	if err != nil {
		return err
	}
	s.ingress <- in
	return nil
}

func (s *sink) Dropped(context.Context, *envelope.Ingress, string) {}

func (s *sink) Status(st deliver.Status) {
	select {
	case s.status <- st:
	default:
	}
}

func (s *sink) setFail(err error) {
	s.mu.Lock()
	s.fail = err
	s.mu.Unlock()
}

// next is the next ingress.
func (s *sink) next(t *testing.T) *envelope.Ingress {
	t.Helper()
	select {
	case in := <-s.ingress:
		return in
	case <-time.After(wait):
		t.Fatal("no ingress reached the sink")
		return nil
	}
}

// none checks that nothing reached the sink.
func (s *sink) none(t *testing.T) {
	t.Helper()
	select {
	case in := <-s.ingress:
		t.Fatalf("an ingress reached the sink: %q", in.Content.Text)
	default:
	}
}

func newChannel(t *testing.T, js jetstream.JetStream, id string) *web.Channel {
	t.Helper()
	s, err := web.New(config.Integration{ID: id, Type: "web", Settings: &web.Config{Listen: "127.0.0.1:0"}}, deliver.Env{JS: js, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatal(err)
	}
	return s.(*web.Channel)
}

// serve runs a web integration's Receive on a free port until the test ends.
func serve(t *testing.T, js jetstream.JetStream, id string) (*web.Channel, *sink) {
	t.Helper()
	ch := newChannel(t, js, id)
	sk := newSink()
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- ch.Receive(ctx, sk) }()
	t.Cleanup(func() {
		cancel()
		if err := <-stopped; err != nil {
			t.Errorf("receive: %v", err)
		}
	})
	select {
	case st := <-sk.status:
		if st.State != deliver.StateRunning || st.Detail != ch.URL() || !strings.HasPrefix(st.Detail, "http://127.0.0.1:") {
			t.Fatalf("status %+v, URL %q: want running with the page URL", st, ch.URL())
		}
	case <-time.After(wait):
		t.Fatal("the web channel reported no status")
	}
	return ch, sk
}

// visitor is a person with a browser: a cookie jar.
type visitor struct {
	t      *testing.T
	base   string
	client *http.Client
	id     string // learnt from the event stream's hello
}

func newVisitor(t *testing.T, ch *web.Channel) *visitor {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	v := &visitor{t: t, base: strings.TrimSuffix(ch.URL(), "/"), client: &http.Client{Jar: jar}}
	resp, err := v.client.Get(v.base + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /: %s", resp.Status)
	}
	return v
}

// request posts body to /api/messages as the page does; edit changes the
// request first.
func (v *visitor) request(body string, edit func(*http.Request)) (int, string) {
	v.t.Helper()
	req, err := http.NewRequestWithContext(v.t.Context(), http.MethodPost, v.base+"/api/messages", strings.NewReader(body))
	if err != nil {
		v.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Herald", "1")
	if edit != nil {
		edit(req)
	}
	resp, err := v.client.Do(req)
	if err != nil {
		v.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (v *visitor) post(p map[string]string) (int, string) {
	v.t.Helper()
	b, _ := json.Marshal(p)
	return v.request(string(b), nil)
}

// say sends text and returns its client id.
func (v *visitor) say(text string) string {
	v.t.Helper()
	id := uuid()
	if code, body := v.post(map[string]string{"text": text, "client_id": id}); code != http.StatusAccepted {
		v.t.Fatalf("post: %d %s", code, body)
	}
	return id
}

// upFile is a file a visitor attaches: typ is what the browser claims.
type upFile struct {
	name, typ string
	data      []byte
}

// upload posts p with files as the page does, multipart/form-data: the
// message's JSON, then a part per file; edit changes the request first.
func (v *visitor) upload(p map[string]string, files []upFile, edit func(*http.Request)) (int, string) {
	v.t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	msg, _ := json.Marshal(p)
	part, _ := mw.CreatePart(textproto.MIMEHeader{"Content-Disposition": {`form-data; name="message"`}, "Content-Type": {"application/json"}})
	_, _ = part.Write(msg)
	for _, f := range files {
		h := textproto.MIMEHeader{"Content-Disposition": {mime.FormatMediaType("form-data", map[string]string{"name": "file", "filename": f.name})}}
		if f.typ != "" {
			h.Set("Content-Type", f.typ)
		}
		part, _ := mw.CreatePart(h)
		_, _ = part.Write(f.data)
	}
	_ = mw.Close()
	return v.request(buf.String(), func(r *http.Request) {
		r.Header.Set("Content-Type", mw.FormDataContentType())
		if edit != nil {
			edit(r)
		}
	})
}

// served is a file link's answer.
type served struct {
	code   int
	header http.Header
	data   []byte
}

// download opens a file link (a path of the page) as the visitor's
// browser does, with its cookie.
func (v *visitor) download(link string) served {
	v.t.Helper()
	req, _ := http.NewRequestWithContext(v.t.Context(), http.MethodGet, v.base+link, nil)
	resp, err := v.client.Do(req)
	if err != nil {
		v.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		v.t.Fatalf("GET %s: %v", link, err)
	}
	return served{code: resp.StatusCode, header: resp.Header, data: b}
}

// name is the file name a browser saves the answer as.
func (s served) name() string {
	_, params, _ := mime.ParseMediaType(s.header.Get("Content-Disposition"))
	return params["filename"]
}

// pageFile is a file link as the page receives it.
type pageFile struct {
	Name string `json:"name"`
	Size int64  `json:"size"`
	Type string `json:"type"`
	URL  string `json:"url"`
	Ref  string `json:"ref"` // never sent: the page needs only the link
}

// pageEvent is one conversation event as the page receives it.
type pageEvent struct {
	Seq     uint64            `json:"seq"`
	ID      string            `json:"id"`
	Kind    string            `json:"kind"`
	Butler  string            `json:"butler"`
	User    string            `json:"user"`
	Text    string            `json:"text"`
	HTML    string            `json:"html"`
	ReplyTo string            `json:"reply_to"`
	Target  string            `json:"target"`
	Emoji   string            `json:"emoji"`
	Actions []envelope.Action `json:"actions"`
	Files   []pageFile        `json:"files"`
}

// feed is an open event stream.
type feed struct {
	t      *testing.T
	r      *bufio.Reader
	body   io.Closer
	cancel context.CancelFunc
}

// events opens the visitor's event stream, after lastID if not empty.
func (v *visitor) events(lastID string) *feed {
	v.t.Helper()
	ctx, cancel := context.WithTimeout(v.t.Context(), wait)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, v.base+"/api/events", nil)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := v.client.Do(req)
	if err != nil {
		cancel()
		v.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		cancel()
		v.t.Fatalf("GET /api/events: %s %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	f := &feed{t: v.t, r: bufio.NewReader(resp.Body), body: resp.Body, cancel: cancel}
	v.t.Cleanup(f.close)
	name, data, _ := f.read()
	if name != "hello" {
		v.t.Fatalf("first event %q, want hello", name)
	}
	var hello struct{ Visitor string }
	if err := json.Unmarshal([]byte(data), &hello); err != nil || hello.Visitor == "" {
		v.t.Fatalf("hello %q: %v", data, err)
	}
	v.id = hello.Visitor
	return f
}

func (f *feed) close() {
	f.cancel()
	f.body.Close()
}

// read returns the next event's name, data and id, skipping comments.
func (f *feed) read() (name, data, id string) {
	f.t.Helper()
	for {
		line, err := f.r.ReadString('\n')
		if err != nil {
			f.t.Fatalf("event stream: %v", err)
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if data != "" {
				return name, data, id
			}
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data += strings.TrimPrefix(line, "data: ")
		case strings.HasPrefix(line, "id: "):
			id = strings.TrimPrefix(line, "id: ")
		}
	}
}

// next is the next conversation event; its SSE id must be its seq.
func (f *feed) next() pageEvent {
	f.t.Helper()
	name, data, id := f.read()
	if name != "" {
		f.t.Fatalf("event %q, want a message event", name)
	}
	var ev pageEvent
	if err := json.Unmarshal([]byte(data), &ev); err != nil {
		f.t.Fatalf("event %q: %v", data, err)
	}
	if id != fmt.Sprint(ev.Seq) {
		f.t.Fatalf("event id %q, seq %d: want the same", id, ev.Seq)
	}
	return ev
}

// ended reports whether the server closed the stream.
func (f *feed) ended() bool {
	for {
		line, err := f.r.ReadString('\n')
		if err != nil {
			return err == io.EOF || strings.Contains(err.Error(), "EOF")
		}
		if line != "\n" && !strings.HasPrefix(line, ":") {
			return false
		}
	}
}

func uuid() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// body is a JSON body with the given fields.
func body(fields map[string]any) string {
	var buf bytes.Buffer
	_ = json.NewEncoder(&buf).Encode(fields)
	return buf.String()
}
