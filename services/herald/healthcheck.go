package herald

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/heraldhq/herald/pkg/config"
)

const healthcheckUsage = `Usage:
  herald healthcheck [--timeout D] [URL]

GETs URL (default http://<HERALD_HTTP_LISTEN or 127.0.0.1:8790>/readyz) and
exits 0 on a 2xx answer, else 1 with the reason on one line. For health
checks of images with no shell (compose, Kubernetes exec probes).
`

// runHealthcheck is `herald healthcheck [URL]`.
func runHealthcheck(ctx context.Context, args []string, o IO) error {
	fs := flag.NewFlagSet("herald healthcheck", flag.ContinueOnError)
	fs.SetOutput(o.Stderr)
	fs.Usage = func() { fmt.Fprint(o.Stderr, healthcheckUsage) }
	timeout := fs.Duration("timeout", 2500*time.Millisecond, "how long to wait for the answer (keep it under the prober's own timeout)")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 1 {
		fs.Usage()
		return flag.ErrHelp
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
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if resp.StatusCode/100 == 2 {
		return nil
	}
	reason := oneLine(string(body))
	if reason == "" {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return fmt.Errorf("%s: %s: %s", url, resp.Status, reason)
}

// defaultHealthURL is /readyz on this process's HTTP listener, as
// HERALD_HTTP_LISTEN (or the default) names it; an address that listens on
// every interface is asked on loopback.
func defaultHealthURL(getenv config.Getenv) string {
	listen := config.DefaultHTTPListen
	if getenv != nil && getenv("HERALD_HTTP_LISTEN") != "" {
		listen = getenv("HERALD_HTTP_LISTEN")
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
