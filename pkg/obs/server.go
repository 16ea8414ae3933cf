package obs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// Server is a process's one HTTP listener (design §9, http_listen): it
// serves /healthz, /readyz and /metrics, and whatever else the process's
// services mount on it (the messenger's /hooks/ and /slack/ endpoints).
type Server struct {
	addr string
	log  *slog.Logger
	mux  *http.ServeMux

	mu sync.Mutex
	ln net.Listener
}

// shutdownGrace is how long requests in flight may finish at stop.
const shutdownGrace = 5 * time.Second

// NewServer is a server for addr (host:port; port 0 picks one) with h's
// /healthz and /readyz and m's /metrics, answered only for the Hosts
// OperatorHost takes; a nil h is always ready, a nil m
// serves no /metrics. log nil is slog.Default().
func NewServer(addr string, h *Health, m *Metrics, log *slog.Logger) *Server {
	if log == nil {
		log = slog.Default()
	}
	s := &Server{addr: addr, log: log, mux: http.NewServeMux()}
	// The operator's endpoints check Host (OperatorHost); what channels mount
	// (webhooks, Slack's events) is called by providers under any name.
	s.mux.Handle("GET /healthz", operatorOnly(addr, h.LiveHandler()))
	s.mux.Handle("GET /readyz", operatorOnly(addr, h.ReadyHandler()))
	if m != nil {
		s.mux.Handle("GET /metrics", operatorOnly(addr, m.Handler()))
	}
	return s
}

// Handle mounts handler at pattern (http.ServeMux syntax: "/hooks/",
// "POST /slack/{id}/events"), before or while serving. It panics, as
// ServeMux does, if pattern conflicts with one already mounted.
func (s *Server) Handle(pattern string, handler http.Handler) { s.mux.Handle(pattern, handler) }

// Handler is everything mounted, for tests and in-process use.
func (s *Server) Handler() http.Handler { return s.mux }

// Listen opens the listener, so that a taken address fails at start and the
// real address (of port 0) is known before Serve; Serve calls it if needed.
func (s *Server) Listen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln != nil {
		return nil
	}
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("http_listen %s: %w", s.addr, err)
	}
	s.ln = ln
	return nil
}

// URL is "http://host:port" of the open listener, "" before Listen.
func (s *Server) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return ""
	}
	return "http://" + s.ln.Addr().String()
}

// Serve serves until ctx is done, then lets requests in flight finish for a
// few seconds and returns once the listener is closed. It returns nil on
// such a stop, and the error if serving failed.
func (s *Server) Serve(ctx context.Context) error {
	if err := s.Listen(); err != nil {
		return err
	}
	s.mu.Lock()
	ln := s.ln
	s.mu.Unlock()
	srv := &http.Server{
		Handler:           s.mux,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	s.log.Info("http listening", "url", "http://"+ln.Addr().String())
	select {
	case err := <-errc:
		return fmt.Errorf("http_listen %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close() // long-lived requests do not end by themselves
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
