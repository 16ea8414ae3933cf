// Command telegram-standin is the Telegram Bot API stand-in of the compose
// test (e2e/compose): the project's own fake, telegramtest, served on an
// address a container can publish, so the messenger of a real compose fleet
// talks to it over the compose network with TELEGRAM_API_URL, as it would to
// api.telegram.org. It is a test tool, never part of the product's images.
//
//	telegram-standin [-listen 0.0.0.0:8081]
//
// The bot token in TELEGRAM_BOT_TOKEN (the one the messenger sends) is
// valid. Besides the Bot API (/bot<token>/<method>) it serves what the test
// reads back:
//
//	GET /standin/messages?chat=ID   the messages the bot sent to chat ID, oldest first (JSON)
//	GET /standin/calls?method=M     every call of method M as the fake understood it (JSON)
//	GET /standin/healthz            200 while it serves (the container's health check: -healthcheck)
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/heraldhq/herald/services/messenger/telegram/telegramtest"
)

func main() {
	listen := flag.String("listen", "0.0.0.0:8081", "address to serve the Bot API and the read-back endpoints on")
	health := flag.String("healthcheck", "", "ask this URL and exit 0 on a 2xx answer (the image has no shell)")
	flag.Parse()
	if *health != "" {
		os.Exit(healthcheck(*health))
	}
	if err := run(*listen, os.Getenv("TELEGRAM_BOT_TOKEN")); err != nil {
		log.Fatal(err)
	}
}

func healthcheck(u string) int {
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(u)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	_ = resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		fmt.Fprintln(os.Stderr, resp.Status)
		return 1
	}
	return 0
}

func run(listen, token string) error {
	tb := &programTB{}
	fake := telegramtest.NewServer(tb)
	defer tb.cleanup()
	if token != "" {
		fake.AddBot(token)
	}
	if tb.failed != "" {
		return fmt.Errorf("TELEGRAM_BOT_TOKEN: %s", tb.failed)
	}
	upstream, err := url.Parse(fake.URL())
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	// The fake listens on loopback only (httptest); the proxy puts it on the
	// container's interface. Long polls pass through as they are.
	mux.Handle("/", httputil.NewSingleHostReverseProxy(upstream))
	mux.HandleFunc("GET /standin/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /standin/messages", func(w http.ResponseWriter, r *http.Request) {
		chat, err := strconv.ParseInt(r.URL.Query().Get("chat"), 10, 64)
		if err != nil {
			http.Error(w, "chat: want a chat id", http.StatusBadRequest)
			return
		}
		writeJSON(w, fake.Messages(chat))
	})
	mux.HandleFunc("GET /standin/calls", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, fake.Calls(r.URL.Query().Get("method")))
	})
	srv := &http.Server{Addr: listen, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() { <-ctx.Done(); _ = srv.Close() }()
	log.Printf("telegram stand-in serving the Bot API on %s", listen)
	if err := srv.ListenAndServe(); err != http.ErrServerClosed {
		return err
	}
	return nil
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// programTB is the testing.TB telegramtest asks for, in a program: cleanups
// run at exit, a failure is remembered and logged.
type programTB struct {
	testing.TB // the methods telegramtest does not call; calling one panics
	cleanups   []func()
	failed     string
}

func (t *programTB) Helper()                        {}
func (t *programTB) Cleanup(f func())               { t.cleanups = append(t.cleanups, f) }
func (t *programTB) Logf(format string, a ...any)   { log.Printf(format, a...) }
func (t *programTB) Errorf(format string, a ...any) { t.fail(format, a...) }
func (t *programTB) Fatalf(format string, a ...any) { t.fail(format, a...) }
func (t *programTB) fail(format string, a ...any) {
	t.failed = fmt.Sprintf(format, a...)
	log.Print(t.failed)
}

func (t *programTB) cleanup() {
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
}
