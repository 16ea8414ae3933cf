package herald

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/obs"
	"github.com/heraldhq/herald/services/process"
)

const healthcheckUsage = `Usage:
  herald healthcheck [--timeout D] [URL]

GETs URL (default: /readyz at HERALD_HTTP_LISTEN, else of the herald dev
running in this directory, else at 127.0.0.1:8790) and exits 0 on a 2xx
answer, else 1 with the reason on one line. For health
checks of images with no shell (compose, Kubernetes exec probes). A ready
process's parts that cannot work (an integration whose secret is missing)
are printed, one line each, for docker inspect to show.

Examples:
  herald healthcheck                                # the herald dev running here
  herald healthcheck http://127.0.0.1:8790/readyz   # herald dev's readiness, on its default port
`

// runHealthcheck is `herald healthcheck [URL]`.
func runHealthcheck(ctx context.Context, args []string, o IO) error {
	fs := commandFlags("healthcheck", healthcheckUsage, o)
	timeout := process.DurationFlag(fs, "timeout", 2500*time.Millisecond, "how long to wait for the answer; keep it under the prober's own timeout")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 1 {
		return badUsage(fs)
	}
	url := defaultHealthURL(o.Getenv)
	if len(pos) == 1 {
		url = pos[0]
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("%q is not a URL: %w", url, err)
	}
	// Straight to the process: a proxy from the environment is no part of
	// whether it is healthy.
	client := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	resp, err := client.Do(req)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%s: no answer within %s", url, *timeout)
	case err != nil:
		return fmt.Errorf("%s: %w", url, unwrapURLError(err))
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 == 2 {
		// Ready; what cannot work all the same (an integration without its
		// secret) is said, so `docker inspect` shows it in the health log.
		var rep obs.Report
		if json.Unmarshal(body, &rep) == nil {
			for _, part := range slices.Sorted(maps.Keys(rep.Degraded)) {
				fmt.Fprintf(o.Stdout, "ready, but %s cannot work: %s\n", part, oneLine(rep.Degraded[part]))
			}
		}
		return nil
	}
	reason := notReadyReason(body)
	if reason == "" {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return fmt.Errorf("%s: %s: %s", url, resp.Status, reason)
}

// notReadyReason is a 503 answer's reason on one line: the checks that
// failed, each with why, or the body as it came when it is no Report.
func notReadyReason(body []byte) string {
	var rep obs.Report
	if json.Unmarshal(body, &rep) != nil || rep.Ready || len(rep.Checks) == 0 {
		return oneLine(string(body[:min(len(body), 1024)]))
	}
	var failed []string
	integration := false
	for _, name := range slices.Sorted(maps.Keys(rep.Checks)) {
		if why := rep.Checks[name]; why != "ok" {
			failed = append(failed, name+": "+oneLine(why))
			integration = integration || strings.HasPrefix(name, "integration.")
		}
	}
	reason := "not ready: " + strings.Join(failed, "; ")
	if integration {
		reason += " (to stay ready while an integration cannot work, set ready_when_degraded: true)"
	}
	return reason
}

// defaultHealthURL is /readyz on this process's HTTP listener, as
// HERALD_HTTP_LISTEN names it, else on the listener of the herald dev
// running in this directory (DevStateFile), else on the default; an
// address that listens on every interface is asked on loopback.
func defaultHealthURL(getenv config.Getenv) string {
	listen := config.DefaultHTTPListen
	if getenv != nil && getenv("HERALD_HTTP_LISTEN") != "" {
		listen = getenv("HERALD_HTTP_LISTEN")
	} else if st, err := ReadDevState(DevStateFile); err == nil && st != nil && st.HTTP != "" {
		return st.HTTP + "/readyz"
	}
	if host, port, err := net.SplitHostPort(listen); err == nil {
		switch host {
		case "", "0.0.0.0":
			listen = net.JoinHostPort("127.0.0.1", port)
		case "::":
			listen = net.JoinHostPort("::1", port)
		}
	}
	return "http://" + listen + "/readyz"
}

// unwrapURLError drops *url.Error's repetition of the method and URL.
func unwrapURLError(err error) error {
	if u := errors.Unwrap(err); u != nil && strings.HasPrefix(err.Error(), "Get ") {
		return u
	}
	return err
}

// oneLine squeezes a body into one line of at most 300 characters.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 300 {
		s = string(r[:297]) + "..."
	}
	return s
}
