package web

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"golang.org/x/time/rate"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

//go:embed static
var staticFS embed.FS

const (
	cookieName = "herald_web"
	// maxBody bounds a post: MaxText of text, even if every character is
	// JSON-escaped, plus the other fields.
	maxBody = 8*MaxText + 4<<10
	// ping keeps idle event streams open through proxies and finds dead
	// browsers.
	ping = 20 * time.Second
	// readyWait is how long a stream waits for the fan-out to follow the
	// conversations (at start, or after the bus came back) before it is
	// answered 503 and the page retries.
	readyWait = 10 * time.Second
	// maxHeaderBytes is plenty for the page's cookie among others that
	// localhost may carry, and a sixteenth of the server's default.
	maxHeaderBytes = 64 << 10
	// shutdownGrace is how long a stopping messenger lets posts finish.
	shutdownGrace = 5 * time.Second
	// contentSecurityPolicy allows nothing but the page's own files: no
	// inline script, so even markup that slipped through could not run.
	contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; " +
		"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)

// serverTimeouts bound how long a slow or silent client holds a connection.
// The read timeout covers reading a request (net/http clears the deadline once
// it is read); an event stream, meant to stay open, replaces the server's
// write timeout with a deadline of write on each of its writes.
type serverTimeouts struct {
	readHeader, read, write, idle time.Duration
}

var defaultTimeouts = serverTimeouts{
	readHeader: 10 * time.Second,
	read:       30 * time.Second,
	write:      30 * time.Second,
	idle:       2 * time.Minute,
}

var (
	secretPattern    = regexp.MustCompile(`^[0-9a-f]{64}$`)
	uuidPattern      = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	messageIDPattern = regexp.MustCompile(`^[A-Za-z0-9-]{1,64}$`)
	// callbackPattern is notify.v1's pattern for an action's data.
	callbackPattern = regexp.MustCompile(`^[A-Za-z0-9_:.-]{1,64}$`)
)

// Receive serves the page on the integration's listen address until ctx is
// done, then stops taking posts and lets those in flight finish.
func (c *Channel) Receive(ctx context.Context, sink deliver.Sink) error {
	c.mu.Lock()
	if c.receiving {
		c.mu.Unlock()
		return fmt.Errorf("web:%s is already serving its page", c.id)
	}
	c.receiving = true
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.receiving, c.url = false, ""
		c.mu.Unlock()
	}()

	ln, err := net.Listen("tcp", c.listen)
	if err != nil {
		err = fmt.Errorf("web chat cannot listen on %s: %w", c.listen, err)
		sink.Status(c.status(deliver.StateError, err.Error()))
		return err
	}
	url := pageURL(c.listen, ln.Addr())
	c.mu.Lock()
	c.url = url
	c.mu.Unlock()

	// One follower of the conversations for every page this process serves.
	fan := newFanout(c.log)
	c.mu.Lock()
	c.fan = fan
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.fan = nil
		c.mu.Unlock()
	}()
	if c.nc != nil {
		// "typing…" from whichever replica runs the loop. Best effort, as
		// typing is everywhere: without it the page shows none.
		sub, err := c.nc.Subscribe(bus.WebTypingSubject(c.id, "*"), func(m *nats.Msg) {
			if v := m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]; visitorPattern.MatchString(v) {
				fan.typing(v, m.Data)
			}
		})
		if err != nil {
			c.log.Warn("web chat cannot hear typing…; its pages show none", "err", err)
		} else {
			defer func() { _ = sub.Unsubscribe() }()
		}
	}
	fanCtx, stopFan := context.WithCancel(context.WithoutCancel(ctx))
	fanDone := make(chan struct{})
	go func() {
		defer close(fanDone)
		fan.run(fanCtx, c.store, c.id)
	}()
	defer func() {
		stopFan()
		<-fanDone
	}()

	closing := make(chan struct{})
	h := &handler{
		c: c, sink: sink, closing: closing, hosts: allowedHosts(c.listen, c.allowedHosts), drops: rate.NewLimiter(5, 20),
		fan: fan, streams: newStreamCounts(), reads: make(chan struct{}, maxHistoryReads),
		uploads: make(chan struct{}, maxUploads),
	}
	srv := &http.Server{
		Handler:           h.routes(),
		ReadHeaderTimeout: c.timeouts.readHeader,
		ReadTimeout:       c.timeouts.read,
		WriteTimeout:      c.timeouts.write, // per write for event streams
		IdleTimeout:       c.timeouts.idle,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(c.log.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	c.log.Info("web chat listening", "url", url)
	sink.Status(c.status(deliver.StateRunning, url))

	select {
	case err := <-served:
		err = fmt.Errorf("web chat stopped serving %s: %w", url, err)
		sink.Status(c.status(deliver.StateError, err.Error()))
		return err
	case <-ctx.Done():
	}
	close(closing) // event streams end; the pages reconnect to another replica or after the restart
	stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(stop); err != nil {
		c.log.Warn("web chat did not stop cleanly", "err", err)
		_ = srv.Close()
	}
	<-served
	return nil
}

func (c *Channel) status(state, detail string) deliver.Status {
	return deliver.Status{Integration: c.id, Channel: "web", State: state, Detail: detail, UpdatedAt: time.Now().UTC()}
}

// pageURL is the address a person opens: the configured host, or loopback
// when listening on every interface, with the port actually bound.
func pageURL(listen string, addr net.Addr) string {
	host, _, _ := net.SplitHostPort(listen)
	_, port, _ := net.SplitHostPort(addr.String())
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/"
}

// allowedHosts are the Host names the page answers besides loopback ones:
// the address it is bound to, unless that is every interface, and the
// configured allowed_hosts.
func allowedHosts(listen string, configured []string) map[string]bool {
	hosts := map[string]bool{}
	if host, _, err := net.SplitHostPort(listen); err == nil && host != "" && !net.ParseIP(host).IsUnspecified() {
		hosts[strings.ToLower(host)] = true
	}
	for _, h := range configured {
		hosts[strings.ToLower(strings.Trim(h, "[]"))] = true
	}
	return hosts
}

func loopbackHost(host string) bool {
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// handler serves one Receive.
type handler struct {
	c       *Channel
	sink    deliver.Sink
	closing chan struct{}
	hosts   map[string]bool // allowed besides loopback names
	fan     *fanout
	streams *streamCounts
	reads   chan struct{} // a slot per history read in flight
	uploads chan struct{} // a slot per post with files in flight
	drops   *rate.Limiter // audit records of refused requests
}

// reasonForeignHost is the audit reason of a request for a Host the chat
// does not answer.
const reasonForeignHost = "foreign_host"

func (h *handler) routes() http.Handler {
	static, _ := fs.Sub(staticFS, "static")
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", h.page)
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /api/events", h.events)
	mux.HandleFunc("POST /api/messages", h.post)
	mux.HandleFunc("GET /api/files/{seq}/{index}", h.file)
	return h.guard(http.NewCrossOriginProtection().Handler(mux))
}

// guard sets the headers every answer carries and refuses every Host but
// localhost, the bound address and allowed_hosts, wherever the page listens
// (in a container it listens on every interface): a web site that rebinds its
// own name to this machine must not be able to chat with the butlers.
func (h *handler) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hdr := w.Header()
		hdr.Set("Content-Security-Policy", contentSecurityPolicy)
		hdr.Set("X-Content-Type-Options", "nosniff")
		hdr.Set("X-Frame-Options", "DENY")
		hdr.Set("Referrer-Policy", "no-referrer")
		hdr.Set("Cross-Origin-Opener-Policy", "same-origin")
		hdr.Set("Cross-Origin-Resource-Policy", "same-origin")
		hdr.Set("Cache-Control", "no-cache")
		host := r.Host
		if hh, _, err := net.SplitHostPort(host); err == nil {
			host = hh
		}
		host = strings.ToLower(strings.Trim(host, "[]"))
		if !loopbackHost(host) && !h.hosts[host] {
			// A page asked for under another name (DNS rebinding, a wrong
			// link): refused and audited, at most a few a second.
			if h.drops.Allow() {
				h.sink.Dropped(r.Context(), envelope.NewIngress(h.c.id, "web", h.c.id, "", "", "", "", map[string]string{"host": r.Host}), reasonForeignHost)
			}
			fail(w, http.StatusMisdirectedRequest, fmt.Sprintf("this chat does not answer for %q; open %s, or add the name to the integration's allowed_hosts", r.Host, h.c.URL()))
			return
		}
		// No route takes more than a post (with its files); a handler
		// reading past this gets a *http.MaxBytesError and answers 413.
		r.Body = http.MaxBytesReader(w, r.Body, h.bodyLimit(r))
		next.ServeHTTP(w, r)
	})
}

// bodyLimit is the most a request may carry: a post, or with files a post
// and maxFiles of the largest file, with room for their part headers.
func (h *handler) bodyLimit(r *http.Request) int64 {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt == "multipart/form-data" {
		return maxBody + maxFiles*(h.c.maxFile+4<<10)
	}
	return maxBody
}

func (h *handler) page(w http.ResponseWriter, r *http.Request) {
	h.visitor(w, r, true)
	page, err := staticFS.ReadFile("static/index.html")
	if err != nil {
		fail(w, http.StatusInternalServerError, "page missing from the build")
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	http.ServeContent(w, r, "index.html", time.Time{}, bytes.NewReader(page))
}

// visitor returns the visitor id of the request's cookie; with issue, a
// request without one gets a new cookie.
func (h *handler) visitor(w http.ResponseWriter, r *http.Request, issue bool) (string, bool) {
	if ck, err := r.Cookie(cookieName); err == nil && secretPattern.MatchString(ck.Value) {
		return visitorID(ck.Value), true
	}
	if !issue {
		return "", false
	}
	var b [32]byte
	_, _ = rand.Read(b[:])
	secret := hex.EncodeToString(b[:])
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: secret, Path: "/",
		MaxAge:   400 * 24 * 60 * 60, // the most browsers keep
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
	return visitorID(secret), true
}

// visitorID is the public name of a cookie's secret.
func visitorID(secret string) string {
	sum := sha256.Sum256([]byte("herald web visitor\x00" + secret))
	return hex.EncodeToString(sum[:12])
}

// post is what the page sends: a message the person typed, or the press of a
// button under a butler's message (callback_data, reply_to).
type post struct {
	Text         string `json:"text"`
	ClientID     string `json:"client_id"`
	Name         string `json:"name,omitempty"`
	CallbackData string `json:"callback_data,omitempty"`
	ReplyTo      string `json:"reply_to,omitempty"`
}

// decodePost reads and checks one post; errors are sentences for the page.
// withFiles, its text may be empty: the files are the message.
func decodePost(r io.Reader, withFiles bool) (post, error) {
	var p post
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return post{}, fmt.Errorf("the body is not a message: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return post{}, errors.New("the body holds more than one JSON object")
	}
	p.ClientID = strings.ToLower(p.ClientID)
	p.Name = strings.TrimSpace(p.Name)
	switch {
	case strings.TrimSpace(p.Text) == "" && !withFiles:
		return post{}, errors.New("the message is empty")
	case len(p.Text) > MaxText:
		return post{}, fmt.Errorf("the message is %d bytes; the limit is %d", len(p.Text), MaxText)
	case !utf8.ValidString(p.Text):
		return post{}, errors.New("the message is not valid UTF-8")
	case !uuidPattern.MatchString(p.ClientID):
		return post{}, errors.New("client_id must be a UUID")
	case utf8.RuneCountInString(p.Name) > 64 || strings.ContainsFunc(p.Name, unicode.IsControl) || !utf8.ValidString(p.Name):
		return post{}, errors.New("the name must be at most 64 printable characters")
	case p.CallbackData != "" && !callbackPattern.MatchString(p.CallbackData):
		return post{}, errors.New("callback_data must be 1-64 of A-Z a-z 0-9 _ : . -")
	case p.ReplyTo != "" && !messageIDPattern.MatchString(p.ReplyTo):
		return post{}, errors.New("reply_to is not a message id")
	}
	return p, nil
}

// post turns what the person sent into an ingress and answers 202 once the
// sink holds it durably; the page retries anything else but a refusal.
func (h *handler) post(w http.ResponseWriter, r *http.Request) {
	// A custom header cannot be sent cross-origin without a CORS preflight,
	// which this server never grants.
	if r.Header.Get("X-Herald") != "1" {
		fail(w, http.StatusForbidden, "missing header X-Herald: 1 (the chat page sends it; it keeps other sites from posting)")
		return
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || (mt != "application/json" && mt != "multipart/form-data") {
		fail(w, http.StatusUnsupportedMediaType, "send the message as application/json, or with files as multipart/form-data")
		return
	}
	visitor, ok := h.visitor(w, r, false)
	if !ok {
		fail(w, http.StatusForbidden, "no visitor cookie: reload the page")
		return
	}
	var (
		p     post
		files []heldFile
	)
	if mt == "multipart/form-data" {
		p, files, err = h.readUpload(w, r)
	} else {
		p, err = readJSON(w, r)
	}
	if err != nil {
		code, reason := refused(err)
		fail(w, code, reason)
		return
	}
	in := h.c.ingress(visitor, p, time.Now())
	in.Attachments = attachments(files)
	if err := h.sink.Ingress(r.Context(), in); err != nil {
		if envelope.ClassOf(err) == envelope.ErrValidation.Error() {
			fail(w, http.StatusBadRequest, err.Error())
			return
		}
		h.c.log.Warn("web message not stored; the page retries", "request_id", in.RequestContext.RequestID, "err", err)
		fail(w, http.StatusServiceUnavailable, "not sent: Herald cannot store messages right now")
		return
	}
	// The butlers have it; now the visitor's other tabs and later reloads.
	// A failure here loses only the echo, so it is logged, not retried.
	// The echo is written even if the browser has gone meanwhile.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 10*time.Second)
	defer cancel()
	e := entry{ID: p.ClientID, Kind: kindVisitor, User: p.Name, Text: p.Text, ReplyTo: p.ReplyTo, Files: files, TS: in.RequestContext.ReceivedAt}
	if err := h.c.store.put(ctx, Subject(h.c.id, visitor), "in:"+visitor+":"+p.ClientID, e); err != nil {
		h.c.log.Warn("web message sent but not kept in the conversation", "request_id", in.RequestContext.RequestID, "err", err)
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"id": p.ClientID, "request_id": in.RequestContext.RequestID})
}

// readJSON reads a post without files; errors are refusals.
func readJSON(w http.ResponseWriter, r *http.Request) (post, error) {
	// Read whole before decoding, as the other receivers do, so a body over
	// the limit is told by the read itself, whatever the JSON decoder makes
	// of the error it would have met.
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if _, tooBig := errors.AsType[*http.MaxBytesError](err); tooBig {
		return post{}, refuse(http.StatusRequestEntityTooLarge, "the message is too long; the limit is %d bytes", MaxText)
	}
	if err != nil {
		return post{}, refuse(http.StatusBadRequest, "the body could not be read")
	}
	p, err := decodePost(bytes.NewReader(body), false)
	if err != nil {
		return post{}, refuse(http.StatusBadRequest, "%s", err)
	}
	return p, nil
}

// ingress is the envelope of one post. The page's client_id is the message
// id, so a retried post has the same native_id and is deduplicated.
func (c *Channel) ingress(visitor string, p post, now time.Time) *envelope.Ingress {
	user := p.Name
	if user == "" {
		user = "visitor"
	}
	meta := map[string]string{
		"chat_id":    visitor,
		"chat_type":  "private",
		"message_id": p.ClientID,
		"user":       user,
		"user_id":    visitor,
		"ts":         strconv.FormatInt(now.Unix(), 10),
	}
	if p.CallbackData != "" {
		meta["callback_data"] = p.CallbackData
	}
	if p.ReplyTo != "" {
		meta["reply_to_message_id"] = p.ReplyTo
	}
	return envelope.NewIngress(c.id, "web", c.id, envelope.WebPrefix+visitor, visitor+":"+p.ClientID, p.Text,
		"web:"+c.id+":"+visitor+":"+p.ClientID, meta)
}

// event is an entry as the page gets it: butler markdown rendered to safe
// HTML here, never in the browser.
type event struct {
	entry
	Seq  uint64 `json:"seq"`
	HTML string `json:"html,omitempty"`
	// Files are links in place of the entry's refs.
	Files []fileLink `json:"files,omitempty"`
}

// errGone ends a history read whose page has gone.
var errGone = errors.New("the page has gone")

// events streams the visitor's conversation as Server-Sent Events: first
// everything after Last-Event-ID (or ?after=), then each entry as it comes.
// A request without the page's cookie is refused and creates nothing; so is
// one over the open streams allowed to its visitor or its address.
func (h *handler) events(w http.ResponseWriter, r *http.Request) {
	visitor, ok := h.visitor(w, r, false)
	if !ok {
		fail(w, http.StatusForbidden, "no visitor cookie: reload the page")
		return
	}
	release, refused := h.streams.open(clientAddress(r), visitor)
	if refused != "" {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
		fail(w, http.StatusTooManyRequests, refused)
		return
	}
	defer release()
	after, _ := strconv.ParseUint(r.Header.Get("Last-Event-ID"), 10, 64)
	if after == 0 {
		after, _ = strconv.ParseUint(r.URL.Query().Get("after"), 10, 64)
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go func() {
		select {
		case <-h.closing:
			cancel()
		case <-ctx.Done():
		}
	}()

	// Listen before reading the history, so nothing stored in between is
	// missed; what both bring is sent once (by sequence).
	l, ok := h.follow(ctx, w, visitor)
	if !ok {
		return
	}
	defer h.fan.unsubscribe(l)
	s := &eventStream{
		w: w, rc: http.NewResponseController(w), writeTimeout: h.c.timeouts.write,
		visitor: visitor, integration: h.c.id, maxFile: h.c.maxFile, last: after,
	}
	if h.replay(ctx, s) {
		s.live(ctx, l)
	}
}

// follow listens to the visitor's conversations, waiting up to readyWait
// for the fan-out to follow them. When it does not, a page still there is
// answered 503 and retries, and ok is false.
func (h *handler) follow(ctx context.Context, w http.ResponseWriter, visitor string) (l *listener, ok bool) {
	waitCtx, cancelWait := context.WithTimeout(ctx, readyWait)
	l, err := h.fan.subscribe(waitCtx, visitor)
	cancelWait()
	if err != nil {
		if ctx.Err() == nil {
			h.c.log.Warn("web chat not following its conversations yet; a page is told to retry")
			fail(w, http.StatusServiceUnavailable, "the conversation cannot be loaded right now; the page retries")
		}
		return nil, false
	}
	return l, true
}

// replay sends the visitor's conversation after the stream's last event,
// starting the stream before the first, or after the history if it brought
// nothing. False when the stream is over: the page has gone, the request
// ended, or the conversation could not be read.
func (h *handler) replay(ctx context.Context, s *eventStream) bool {
	err := h.history(ctx, s.visitor, s.last, func(st stored) error {
		if !s.started && !s.start() {
			return errGone
		}
		fr, err := render(st)
		if err != nil {
			return nil
		}
		if !s.sendFrame(fr) {
			return errGone
		}
		return nil
	})
	switch {
	case errors.Is(err, errGone) || ctx.Err() != nil:
		return false
	case err != nil:
		h.c.log.Warn("web conversation unavailable", "err", err)
		if !s.started {
			fail(s.w, http.StatusServiceUnavailable, "the conversation cannot be loaded right now; the page retries")
		}
		return false // a started page reconnects from its last event
	}
	return s.started || s.start()
}

// eventStream is one page's stream of Server-Sent Events: where it writes,
// whether it has answered yet, and the last event it sent.
type eventStream struct {
	w  http.ResponseWriter
	rc *http.ResponseController
	// writeTimeout bounds each write (see send).
	writeTimeout         time.Duration
	visitor, integration string
	// maxFile is the largest file the visitor may send, told to the page.
	maxFile int64
	started bool
	last    uint64
}

// send writes to the stream and flushes it; false when the page has gone.
// The server's write timeout bounds a whole response, and a stream is
// meant to stay open: each write gets a deadline of its own instead, so a
// page that stops reading still lets go of its connection. (The read
// deadline needs no lifting: net/http clears it once the request is read.)
func (s *eventStream) send(format string, a ...any) bool {
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.writeTimeout))
	if _, err := fmt.Fprintf(s.w, format, a...); err != nil {
		return false
	}
	return s.rc.Flush() == nil
}

// start answers the request as an event stream, and sends the hello event
// naming the visitor and the integration.
func (s *eventStream) start() bool {
	s.started = true
	hdr := s.w.Header()
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("X-Accel-Buffering", "no")
	s.w.WriteHeader(http.StatusOK)
	hello, _ := json.Marshal(map[string]any{"visitor": s.visitor, "integration": s.integration, "max_file": s.maxFile})
	return s.send("retry: 2000\nevent: hello\ndata: %s\n\n", hello)
}

// sendFrame sends one event of the conversation, and notes it as the last
// sent.
func (s *eventStream) sendFrame(fr frame) bool {
	if !s.send("id: %d\ndata: %s\n\n", fr.seq, fr.data) {
		return false
	}
	s.last = fr.seq
	return true
}

// live sends each new event of the conversation as the fan-out brings it,
// skipping what the history sent, and a ping while there is none, until
// the page goes, the fan-out drops the stream, or ctx ends.
func (s *eventStream) live(ctx context.Context, l *listener) {
	tick := time.NewTicker(ping)
	defer tick.Stop()
	for {
		select {
		case fr := <-l.events:
			if fr.typing {
				if !s.send("event: typing\ndata: %s\n\n", fr.data) {
					return
				}
				continue
			}
			if fr.seq <= s.last {
				continue // already sent from the history
			}
			if !s.sendFrame(fr) {
				return
			}
		case <-l.gone:
			return // fell behind, or the feed restarted: the page reconnects and catches up
		case <-tick.C:
			if !s.send(": ping\n\n") {
				return
			}
		case <-ctx.Done():
			return
		}
	}
}

// history sends the visitor's conversation after sequence after, with at
// most maxHistoryReads reads in flight for the whole page.
func (h *handler) history(ctx context.Context, visitor string, after uint64, each func(stored) error) error {
	select {
	case h.reads <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-h.reads }()
	return h.c.store.history(ctx, []string{Subject(h.c.id, visitor), Subject(h.c.id, Broadcast)}, after, each)
}

// refused is the answer to a request a reader refused.
func refused(err error) (int, string) {
	if ref, ok := errors.AsType[*refusal](err); ok {
		return ref.code, ref.reason
	}
	return http.StatusInternalServerError, err.Error()
}

func fail(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
