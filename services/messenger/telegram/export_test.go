package telegram

import (
	"net/http"
	"time"

	"github.com/heraldhq/herald/services/messenger/deliver"
)

// SetTiming shortens r's waits for tests: the long poll (whole seconds), the
// lease TTL, and every backoff.
func SetTiming(r deliver.Receiver, poll, lease, backoff time.Duration) {
	rr := r.(*receiver)
	rr.timing = timing{poll: poll, lease: lease, retryMin: backoff, retryMax: 4 * backoff, refusedMin: backoff, refusedMax: 4 * backoff}
	rr.poller.Timeout = poll + requestTimeout
}

// SetPollTransport makes r's getUpdates calls go through rt.
func SetPollTransport(r deliver.Receiver, rt http.RoundTripper) {
	r.(*receiver).poller.Transport = rt
}
