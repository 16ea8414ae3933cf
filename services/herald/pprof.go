package herald

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"time"

	"github.com/heraldhq/herald/pkg/config"
)

// PprofEnv names the variable that opens Go's profiler endpoints on a herald
// process: HERALD_PPROF=127.0.0.1:6060 serves net/http/pprof's
// /debug/pprof/ there (`go tool pprof http://127.0.0.1:6060/debug/pprof/profile?seconds=10`).
// `make bench PROFILE=1` sets it to profile herald dev while measuring it.
// Unset, nothing listens. The endpoints show the process's memory and
// stacks, so only loopback addresses are taken.
const PprofEnv = "HERALD_PPROF"

// servePprof serves the profiler endpoints on the address PprofEnv names, if
// any, until the returned stop is called. A bad or taken address is logged,
// not returned: profiling serves whoever measures, and is never a reason for
// the fleet not to run. The handlers are mounted on a mux of their own;
// nothing of Herald serves http.DefaultServeMux, where net/http/pprof also
// registers them.
func servePprof(getenv config.Getenv, log *slog.Logger) (stop func()) {
	if getenv == nil {
		getenv = os.Getenv
	}
	if log == nil {
		log = slog.Default()
	}
	addr := getenv(PprofEnv)
	if addr == "" {
		return func() {}
	}
	if host, _, err := net.SplitHostPort(addr); err != nil || !loopback(host) {
		log.Error(PprofEnv+" must be a loopback host:port, like 127.0.0.1:6060; profiler not started", "addr", addr)
		return func() {}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		log.Error("profiler not started", "addr", addr, "err", err)
		return func() {}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index) // named profiles: heap, allocs (?seconds=N for a delta), goroutine, ...
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			log.Error("profiler stopped", "err", err)
		}
	}()
	log.Info("profiler listening", "url", "http://"+ln.Addr().String()+"/debug/pprof/")
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			_ = srv.Close() // a CPU profile in progress does not end by itself
		}
		<-served
	}
}

// loopback reports whether host names this machine only.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
