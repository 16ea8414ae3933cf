package butler

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/obs"
	"github.com/heraldhq/herald/pkg/token"
)

// MaxRequestBody bounds one MCP request body; a larger one is answered 413
// before it is read (the MCP library would otherwise hold all of it).
const MaxRequestBody = 1 << 20

// TokenCacheFor is how long a butler trusts its lookup of a minted token: a
// revoked token stops working within this time, an open GET stream ends too.
const TokenCacheFor = 3 * time.Second

// Timeouts of the butler's HTTP server. ReadTimeout bounds reading a request
// (headers and body); net/http lifts it once the body is read, so a notify
// waiting for its delivery and the long-lived GET stream are not cut. There is
// no WriteTimeout for the same reason: it would end them.
const (
	readHeaderTimeout = 10 * time.Second
	readTimeout       = 30 * time.Second
	idleTimeout       = 2 * time.Minute
)

// access decides who may talk to the butler over HTTP: requests for one of
// its host names, from no foreign web page, with a bearer token that is the
// butler's static token or a live token minted for it.
type access struct {
	butler string
	log    *slog.Logger
	// static is the butler's mcp_token_env / mcp_token_file token, "" if none.
	static string
	// staticErr says why a configured static token could not be read;
	// ServeHTTP refuses to start with it.
	staticErr error
	minted    *token.Verifier
	// hosts are the allowed Host names besides loopback ones (lower case).
	hosts map[string]bool
	// refusals bounds the log lines of refused tokens: anyone who reaches
	// the port can send them.
	refusals obs.Throttle
	// runs are the tokens of the runs this process started (runner.go),
	// each to the run's id; they live as long as the run.
	runs sync.Map
}

// runKey is the context key of the run whose token a request carries.
type runKey struct{}

// runOf is the id of the run a request or tool call comes from, "" if it
// comes from no run this process started.
func runOf(ctx context.Context) string {
	id, _ := ctx.Value(runKey{}).(string)
	return id
}

// runToken mints the bearer token of run id; dropRunToken ends it.
func (a *access) runToken(id string) string {
	tok := "run_" + rand.Text() + rand.Text()
	a.runs.Store(tok, id)
	return tok
}

func (a *access) dropRunToken(tok string) { a.runs.Delete(tok) }

func newAccess(name string, bc *config.Butler, getenv config.Getenv, minted *token.Verifier, log *slog.Logger) *access {
	a := &access{butler: name, log: log, minted: minted, hosts: map[string]bool{}}
	for _, h := range bc.AllowedHosts {
		a.hosts[obs.NormalHost(h)] = true
	}
	if bc.MCPTokenEnv != "" || bc.MCPTokenFile != "" {
		tok, err := config.Secret(getenv, bc.MCPTokenEnv, bc.MCPTokenFile)
		switch {
		case err != nil:
			a.staticErr = fmt.Errorf("butler %s: its static MCP token (mcp_token_env / mcp_token_file): %w", name, err)
		case len(tok) < minStaticToken:
			a.staticErr = fmt.Errorf("%w: butler %s: its static MCP token is %d characters; use at least %d random ones (e.g. openssl rand -hex 32)", config.ErrInvalid, name, len(tok), minStaticToken)
		default:
			a.static = tok
		}
	}
	return a
}

// whereTokensAre ends a 401: where the right token is found. It names no
// butler, since whoever reads it has not shown a token yet.
const whereTokensAre = "A butler's token is in the Claude: line herald dev prints " +
	`(claude mcp add ... --header "Authorization: Bearer <token>"), ` +
	"in the variable or file its mcp_token_env / mcp_token_file names (deploy/.env for the compose fleet), " +
	"or minted with: herald token mint --butler <name>"

// warnIfNoStaticToken says once, at start, that only minted tokens open
// the endpoint: a butler configured without a token answers 401 to every
// client until one is minted, which is otherwise a silent surprise.
func (a *access) warnIfNoStaticToken() {
	if a.static != "" || a.staticErr != nil {
		return
	}
	a.log.Warn("this butler has no static MCP token: its HTTP endpoint answers 401 to every request without a token minted for it; "+
		"mint one with `herald token mint --butler "+a.butler+"`, or set mcp_token_env (or mcp_token_file) for it in herald.yaml "+
		"(herald init writes one per butler into deploy/.env)", "mcp_token_env", "")
}

// minStaticToken is the shortest static token taken: anything a person
// would type is guessable.
const minStaticToken = 16

// guard wraps the MCP endpoint. bound is the address the server listens on
// ("" for a handler mounted elsewhere): its host is allowed too, unless it is
// every interface (0.0.0.0, ::), where only loopback names and allowed_hosts
// are.
func (a *access) guard(bound string, next http.Handler) http.Handler {
	allowed := a.allowedHost(bound)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A web page that rebinds its own name to this address must not reach
		// the butler, wherever it listens.
		if !allowed(r.Host) {
			misdirected(w, r.Host)
			return
		}
		// MCP clients are programs; a browser sends Origin, and a page of
		// another site must not drive the model's tools.
		if origin, ok := r.Header["Origin"]; ok {
			if u, err := url.Parse(strings.Join(origin, "")); err != nil || u.Host == "" || !allowed(u.Host) {
				http.Error(w, "cross-origin requests are refused", http.StatusForbidden)
				return
			}
		}
		if tok, _ := bearer(r); tok != "" {
			if run, ok := a.runs.Load(tok); ok {
				r = r.WithContext(context.WithValue(r.Context(), runKey{}, run))
			}
		}
		rec, ok := a.authorize(w, r)
		if !ok {
			return
		}
		if r.ContentLength > MaxRequestBody {
			http.Error(w, fmt.Sprintf("request body over %d bytes", MaxRequestBody), http.StatusRequestEntityTooLarge)
			return
		}
		if r.Body != nil && r.Body != http.NoBody {
			// Sized from Content-Length when given, so the read does not
			// grow its buffer step by step.
			buf := bytes.NewBuffer(make([]byte, 0, max(r.ContentLength, 0)+bytes.MinRead))
			_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, MaxRequestBody))
			body := buf.Bytes()
			if _, tooLarge := errors.AsType[*http.MaxBytesError](err); tooLarge {
				http.Error(w, fmt.Sprintf("request body over %d bytes", MaxRequestBody), http.StatusRequestEntityTooLarge)
				return
			}
			if err != nil {
				http.Error(w, "reading the request body failed", http.StatusBadRequest)
				return
			}
			r.Body = newBufferedBody(body)
		}
		if r.Method == http.MethodGet && rec.ID != "" {
			a.serveWhileValid(w, r, next)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// authorize checks the bearer token. It answers 401 (or 503 when minted
// tokens cannot be looked up) and returns false when the request may not go
// on; the record is that of a minted token, zero for the static one.
func (a *access) authorize(w http.ResponseWriter, r *http.Request) (token.Record, bool) {
	tok, ok := bearer(r)
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="herald"`)
		http.Error(w, "no bearer token: send Authorization: Bearer <token>. "+whereTokensAre, http.StatusUnauthorized)
		return token.Record{}, false
	}
	if a.static != "" && token.Equal(tok, a.static) || runOf(r.Context()) != "" {
		return token.Record{}, true
	}
	rec, err := a.minted.Verify(r.Context(), tok)
	switch {
	case err == nil:
		return rec, true
	case errors.Is(err, token.ErrUnknown), errors.Is(err, token.ErrExpired):
		attrs := []any{"reason", err.Error(), "remote", r.RemoteAddr}
		// The id is not secret, and tells the operator which token it was.
		if id, ok := token.ParseID(tok); ok {
			attrs = append(attrs, "token_id", id)
		}
		a.refusals.Log(r.Context(), a.log, slog.LevelWarn, "refused an MCP request with an invalid token", attrs...)
		w.Header().Set("WWW-Authenticate", `Bearer realm="herald", error="invalid_token"`)
		http.Error(w, "invalid token: it is not this butler's, or it was revoked or expired. "+whereTokensAre, http.StatusUnauthorized)
	default:
		a.log.Error("cannot check MCP tokens", "err", err)
		w.Header().Set("Retry-After", "5")
		http.Error(w, "cannot check tokens now; try again", http.StatusServiceUnavailable)
	}
	return token.Record{}, false
}

// serveWhileValid serves a GET stream authorized by a minted token and ends
// it once the token is revoked or expires, so a revoked client stops
// receiving the human's messages too.
func (a *access) serveWhileValid(w http.ResponseWriter, r *http.Request, next http.Handler) {
	tok, _ := bearer(r)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	checked := make(chan struct{})
	go func() {
		defer close(checked)
		t := time.NewTicker(TokenCacheFor)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			_, err := a.minted.VerifyNow(ctx, tok)
			if errors.Is(err, token.ErrUnknown) || errors.Is(err, token.ErrExpired) {
				cancel()
				return
			}
		}
	}()
	next.ServeHTTP(w, r.WithContext(ctx))
	cancel()
	<-checked
}

// bufferedBody is a request body read into memory, so that what looks at
// it before the MCP transport need not copy it.
type bufferedBody struct {
	*bytes.Reader
	data []byte
}

func newBufferedBody(data []byte) *bufferedBody {
	return &bufferedBody{Reader: bytes.NewReader(data), data: data}
}

// Close does nothing: the body is in memory.
func (*bufferedBody) Close() error { return nil }

func bearer(r *http.Request) (string, bool) {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	tok = strings.TrimSpace(tok)
	if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" {
		return "", false
	}
	return tok, true
}

// allowedHost is the Host check of a server bound to bound: loopback names,
// allowed_hosts, and the bound address's host unless it is every interface
// (0.0.0.0, ::).
func (a *access) allowedHost(bound string) func(host string) bool {
	hosts := a.hosts
	if host, _, err := net.SplitHostPort(bound); err == nil && host != "" {
		if ip := net.ParseIP(host); ip == nil || !ip.IsUnspecified() {
			hosts = map[string]bool{obs.NormalHost(host): true}
			for h := range a.hosts {
				hosts[h] = true
			}
		}
	}
	return func(host string) bool {
		host = obs.NormalHost(host)
		return obs.LoopbackHost(host) || hosts[host]
	}
}

// hostOnly is the Host check alone, for /healthz and /readyz beside the MCP
// endpoint: they need no token, but answer no name a web page could rebind.
func (a *access) hostOnly(bound string, next http.Handler) http.Handler {
	allowed := a.allowedHost(bound)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !allowed(r.Host) {
			misdirected(w, r.Host)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func misdirected(w http.ResponseWriter, host string) {
	http.Error(w, fmt.Sprintf("this butler does not answer for %q; use its address, or add the name to the butler's allowed_hosts", host), http.StatusMisdirectedRequest)
}
