package e2e

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/testkit"
)

var failedRequestRE = regexp.MustCompile(`\(request_id ([0-9a-f-]{36})\)$`)

// TestAMessageDidNotArriveWalk runs docs/operations.md's "A message did not
// arrive" with the ids the answers give: a notify that failed names its
// request_id, and `herald log --request-id` shows it routed, then failed
// with the class and the reason; a delivered one names both ids, and
// `herald log --delivery-id` shows its trail, in order.
func TestAMessageDidNotArriveWalk(t *testing.T) {
	f := newFleet(t)
	f.start("switchboard", "messenger")
	env := []string{"NATS_URL=" + f.bus.URL()}
	logOf := func(args ...string) string {
		t.Helper()
		var out string
		testkit.Eventually(t, 10*time.Second, func() bool {
			o, err := heraldCLI(t, env, append([]string{"log"}, args...)...)
			out = o
			return err == nil && strings.Count(o, "\n") >= 3 // the header and two records
		}, "the trail in herald log "+strings.Join(args, " "))
		return out
	}

	res := f.notify("health", map[string]any{"channel": "telegram:tg_broken", "message": "Anyone there?"})
	m := failedRequestRE.FindStringSubmatch(text(res))
	if !res.IsError || m == nil || !strings.Contains(text(res), "(not_found)") {
		t.Fatalf("a notify to an integration that cannot work answered %q, want not_found naming its request_id", text(res))
	}
	trail := logOf("--request-id", m[1])
	routed, failed := strings.Index(trail, " routed "), strings.Index(trail, " failed ")
	if routed < 0 || failed < routed || !strings.Contains(trail, `not_found: integration "tg_broken" is configured but cannot be used`) || strings.Contains(trail, "not_found: not_found") {
		t.Fatalf("herald log --request-id %s:\n%s\nwant routed, then failed with its class and reason", m[1], trail)
	}

	res = f.notify("health", map[string]any{"channel": "telegram", "message": "Hello"})
	sent := sentRE.FindStringSubmatch(text(res))
	if res.IsError || sent == nil {
		t.Fatalf("a notify answered %q", text(res))
	}
	trail = logOf("--delivery-id", sent[2])
	routed, delivered := strings.Index(trail, " routed "), strings.Index(trail, " delivered ")
	if routed < 0 || delivered < routed || !strings.Contains(trail, sent[3][:8]) {
		t.Fatalf("herald log --delivery-id %s:\n%s\nwant routed, then delivered, of request %s", sent[2], trail, sent[3])
	}
	t.Logf("herald log --delivery-id %s:\n%s", sent[2], trail)
}
