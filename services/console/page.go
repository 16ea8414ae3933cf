package console

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// Page is the operations port's GET /: the snapshot as a small page that
// refreshes itself, or as JSON (?format=json, or Accept: application/json)
// in `herald status --json`'s shape, as nc's NATS user may see it.
func Page(nc *nats.Conn) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		url := nc.ConnectedUrlRedacted()
		f, err := Collect(r.Context(), nc, Options{URL: url})
		if errors.Is(err, ErrNoFleet) {
			err = fmt.Errorf("%w on NATS at %s: this process's NATS user may not be allowed to ask the fleet (herald status, as the operator, can)", err, url)
		}
		asJSON := r.URL.Query().Get("format") == "json" || strings.Contains(r.Header.Get("Accept"), "application/json")
		if asJSON {
			w.Header().Set("Content-Type", "application/json")
			if err != nil {
				w.WriteHeader(http.StatusServiceUnavailable)
				_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
				return
			}
			_ = json.NewEncoder(w).Encode(f)
			return
		}
		if f == nil {
			f = &Fleet{At: time.Now().UTC(), NATS: url}
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_ = f.HTML(w, err)
	})
}
