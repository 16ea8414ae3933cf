package herald

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHealthcheck(t *testing.T) {
	serve := func(code int, body string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodGet {
				t.Errorf("method %s", r.Method)
			}
			w.WriteHeader(code)
			_, _ = io.WriteString(w, body)
		}))
		t.Cleanup(srv.Close)
		return srv.URL + "/readyz"
	}
	ready := serve(http.StatusOK, `{"ready":true,"checks":{"nats":"ok"}}`)
	notReady := serve(http.StatusServiceUnavailable, "{\"ready\":false,\n\"checks\":{\"nats\":\"NATS is reconnecting\"}}\n")
	down := httptest.NewServer(http.NotFoundHandler())
	gone := down.URL + "/readyz"
	down.Close()
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	t.Cleanup(hung.Close)

	unable := serve(http.StatusServiceUnavailable, `{"ready":false,"checks":{"nats":"ok","integration.mail":"email integration \"mail\": SMTP_URL is not set"}}`)
	plain := serve(http.StatusServiceUnavailable, "draining\n")
	degraded := serve(http.StatusOK, `{"ready":true,"checks":{"nats":"ok"},"degraded":{"integration.mail":"email integration \"mail\": SMTP_URL is not set"}}`)

	tests := []struct {
		name    string
		args    []string
		wantErr []string // all in the one-line error; none: success
		wantOut string   // printed on success
	}{
		{"2xx passes", []string{ready}, nil, ""},
		{"2xx passes and names what cannot work", []string{degraded}, nil, "ready, but integration.mail cannot work: email integration \"mail\": SMTP_URL is not set\n"},
		{"503 fails naming the failed check", []string{notReady}, []string{notReady + ": 503 Service Unavailable: not ready: nats: NATS is reconnecting"}, ""},
		{"503 for an integration says how to stay ready", []string{unable}, []string{unable + `: 503 Service Unavailable: not ready: integration.mail: email integration "mail": SMTP_URL is not set (to stay ready while an integration cannot work, set ready_when_degraded: true)`}, ""},
		{"503 that is no report fails with the body", []string{plain}, []string{plain + ": 503 Service Unavailable: draining"}, ""},
		{"nobody listening", []string{gone}, []string{gone, "connection refused"}, ""},
		{"no answer in time", []string{"--timeout", "50ms", hung.URL + "/readyz"}, []string{hung.URL + "/readyz", "no answer within 50ms"}, ""},
		{"not a URL", []string{"::"}, []string{"is not a URL"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errs bytes.Buffer
			err := runHealthcheck(t.Context(), tt.args, IO{Getenv: func(string) string { return "" }, Stdout: &out, Stderr: &errs})
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("healthcheck: %v", err)
				}
				if out.String() != tt.wantOut {
					t.Fatalf("printed %q, want %q", out.String(), tt.wantOut)
				}
				return
			}
			if err == nil {
				t.Fatal("healthcheck passed")
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("reason is more than one line: %q", err)
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
		})
	}
}

func TestHealthcheckDefaultURL(t *testing.T) {
	tests := []struct{ env, want string }{
		{"", "http://127.0.0.1:8790/readyz"},
		{"0.0.0.0:9000", "http://127.0.0.1:9000/readyz"},
		{":9001", "http://127.0.0.1:9001/readyz"},
		{"[::]:9002", "http://[::1]:9002/readyz"},
		{"10.0.0.5:9003", "http://10.0.0.5:9003/readyz"},
	}
	for _, tt := range tests {
		if got := defaultHealthURL(func(k string) string {
			if k == "HERALD_HTTP_LISTEN" {
				return tt.env
			}
			return ""
		}); got != tt.want {
			t.Errorf("HERALD_HTTP_LISTEN=%q: %s, want %s", tt.env, got, tt.want)
		}
	}
}

func TestHealthcheckUsage(t *testing.T) {
	var errs bytes.Buffer
	err := runHealthcheck(t.Context(), []string{"http://a/readyz", "http://b/readyz"}, IO{Getenv: func(string) string { return "" }, Stderr: &errs})
	if !errors.Is(err, flag.ErrHelp) || !strings.Contains(errs.String(), "herald healthcheck [--timeout D] [URL]") {
		t.Fatalf("two URLs: %v, %q", err, errs.String())
	}
}
