package obs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Server is a process's one HTTP listener (architecture.md §9, http_listen): it
// serves /healthz, /readyz and /metrics, and whatever else the process's
// services mount on it (the messenger's /hooks/ and /slack/ endpoints).
type Server struct {
	addr string
	log  *slog.Logger
	mux  *http.ServeMux

	mu sync.Mutex
	ln net.Listener

	// channels serves every path the operator's endpoints do not: what the
	// messenger mounts (Mount), swapped when it restarts on a reload.
	channels atomic.Pointer[http.Handler]
	// mounted: something was mounted once, so a path nothing serves now
	// is a restart in progress, not a wrong address.
	mounted atomic.Bool
	// page is GET / (SetPage).
	page atomic.Pointer[http.Handler]
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
	s.mux.Handle("GET /{$}", operatorOnly(addr, http.HandlerFunc(s.servePage)))
	s.mux.Handle("/", http.HandlerFunc(s.serveChannels))
	return s
}

// SetPage makes h the operator's GET / (the fleet at a glance).
func (s *Server) SetPage(h http.Handler) { s.page.Store(&h) }

func (s *Server) servePage(w http.ResponseWriter, r *http.Request) {
	if h := s.page.Load(); h != nil {
		(*h).ServeHTTP(w, r)
		return
	}
	http.NotFound(w, r)
}

// Mount makes h serve every request the operator's endpoints do not (the
// messenger's /hooks/ and /slack/ endpoints), in place of what was mounted
// before; nil unmounts. Between an unmount and the next mount (a messenger
// restarting on a reload) requests are answered 503 with Retry-After, so
// a provider sends them again.
func (s *Server) Mount(h http.Handler) {
	if h == nil {
		s.channels.Store(nil)
		return
	}
	s.mounted.Store(true)
	s.channels.Store(&h)
}

func (s *Server) serveChannels(w http.ResponseWriter, r *http.Request) {
	if h := s.channels.Load(); h != nil {
		(*h).ServeHTTP(w, r)
		return
	}
	if s.mounted.Load() {
		w.Header().Set("Retry-After", "1")
		http.Error(w, "Herald's messenger is restarting; try again in a second", http.StatusServiceUnavailable)
		return
	}
	http.NotFound(w, r)
}

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
