package email_test

import (
	"context"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/messenger/deliver"
	"github.com/heraldhq/herald/services/messenger/email"
)

// TestLive sends one real mail through the server of $SMTP_URL to
// $HERALD_TEST_MAIL_TO. The sender is $HERALD_TEST_MAIL_FROM, else the URL's
// user when it is an address, else the recipient; $HERALD_TEST_MAIL_CA_FILE
// names a private CA if the server needs one.
func TestLive(t *testing.T) {
	testkit.SkipWithoutEnv(t, "live email test, sending one real mail", "SMTP_URL", "HERALD_TEST_MAIL_TO")
	to := os.Getenv("HERALD_TEST_MAIL_TO")
	from := os.Getenv("HERALD_TEST_MAIL_FROM")
	if u, err := url.Parse(os.Getenv("SMTP_URL")); from == "" && err == nil && u.User != nil && strings.Contains(u.User.Username(), "@") {
		from = u.User.Username()
	}
	if from == "" {
		from = to
	}

	in := config.Integration{ID: "live", Type: "email", Settings: &email.Config{SMTPURLEnv: "SMTP_URL", From: "Herald <" + from + ">", DefaultTo: to, CAFile: os.Getenv("HERALD_TEST_MAIL_CA_FILE")}}
	s, err := email.New(in, deliver.Env{Getenv: os.Getenv})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	now := time.Now().UTC()
	r, err := s.Deliver(ctx, deliver.Delivery{
		Key:     "herald-live-test-" + now.Format("20060102T150405Z"),
		Intent:  "send",
		Butler:  "herald",
		Subject: "Live test " + now.Format(time.RFC3339),
		Message: "This mail comes from Herald's **live email test** (`TestLive`).\n\n" +
			"- text/plain holds this markdown as written\n" +
			"- text/html renders it\n\nGrüße, Herald",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("sent %v to %s", r.MessageIDs, to)
}
