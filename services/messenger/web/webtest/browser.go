// Package webtest drives the web chat in a real headless Chromium (Debian's
// package) for tests, like httptest for browsers.
package webtest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// ChromiumPath is where Debian's chromium package puts the browser.
const ChromiumPath = "/usr/bin/chromium"

// Browser starts a headless Chromium for the test, with the flags this
// closed network needs, and returns a tab's context. It skips the test, saying
// how to install it, when Chromium is not installed.
func Browser(t *testing.T) context.Context {
	t.Helper()
	if _, err := os.Stat(ChromiumPath); err != nil {
		t.Skip("chromium not installed: apt-get install chromium")
	}
	dir := t.TempDir()
	ctx, cancel := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(ChromiumPath),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		// Without these Chromium keeps trying to reach Google's hosts.
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(dir),
		// Chromium puts its singleton socket in TMPDIR, and leaves it
		// behind: in the test's own directory it goes with the test.
		chromedp.Env("TMPDIR="+dir),
		chromedp.WindowSize(900, 900),
	)
	t.Cleanup(cancel) // runs before the user data dir is removed: it waits for the browser to exit
	ctx, cancelTab := chromedp.NewContext(ctx)
	t.Cleanup(cancelTab)
	ctx, cancelTimeout := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(cancelTimeout)
	return ctx
}
