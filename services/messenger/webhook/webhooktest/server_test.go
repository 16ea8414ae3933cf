package webhooktest_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldhq/herald/services/messenger/webhook/webhooktest"
)

// Known answers. The first is the Standard Webhooks specification's own
// test vector (published with its reference libraries); the second was
// derived outside Go (Python's hmac and `openssl dgst -mac HMAC`) from the
// key 00 01 … 1f, and is derived again below with crypto/hmac directly.
const (
	specSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	specID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	specTimestamp = 1614265330
	specBody      = `{"test": 2432232314}`
	specSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="

	katSecret    = "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
	katID        = "msg_herald_kat"
	katTimestamp = 1700000000
	katBody      = `{"text":"Build 812 failed"}`
	katSignature = "v1,F0uUiEQnDS51j/GfgXDnKcCJlUy45kijEQsW9W8qW6o="
)

func TestSignKnownAnswers(t *testing.T) {
	// By hand: the key is the bytes 0..31, the signed content
	// "<id>.<timestamp>.<body>".
	key := make([]byte, 32)
	for i := range key {
		key[i] = byte(i)
	}
	if got := "whsec_" + base64.StdEncoding.EncodeToString(key); got != katSecret {
		t.Fatalf("the test's secret is %s, want %s", got, katSecret)
	}
	h := hmac.New(sha256.New, key)
	h.Write([]byte(katID + "." + strconv.Itoa(katTimestamp) + "." + katBody))
	if byHand := "v1," + base64.StdEncoding.EncodeToString(h.Sum(nil)); byHand != katSignature {
		t.Fatalf("crypto/hmac gives %s, the recorded answer is %s", byHand, katSignature)
	}

	for _, tc := range []struct {
		name, secret, id string
		ts               int64
		body, want       string
	}{
		{"specification vector", specSecret, specID, specTimestamp, specBody, specSignature},
		{"hand-derived vector", katSecret, katID, katTimestamp, katBody, katSignature},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := webhooktest.Sign(tc.secret, tc.id, tc.ts, []byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("Sign = %s, want %s", got, tc.want)
			}
			at := time.Unix(tc.ts, 0).Add(time.Minute)
			if err := webhooktest.Verify(tc.secret, tc.id, strconv.FormatInt(tc.ts, 10), []byte(tc.body), tc.want, at); err != nil {
				t.Errorf("Verify refuses the known answer: %v", err)
			}
		})
	}
}

func TestVerify(t *testing.T) {
	ts := strconv.Itoa(specTimestamp)
	at := time.Unix(specTimestamp, 0)
	other := webhooktest.NewSecret()
	otherSig, err := webhooktest.Sign(other, specID, specTimestamp, []byte(specBody))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, id, ts, body, header string
		now                        time.Time
		wantErr                    string
	}{
		{"valid", specID, ts, specBody, specSignature, at, ""},
		{"rotation: the matching one among several", specID, ts, specBody, otherSig + " " + specSignature, at, ""},
		{"asymmetric entries are skipped", specID, ts, specBody, "v1a,AAAA " + specSignature, at, ""},
		{"altered body", specID, ts, `{"test": 2432232315}`, specSignature, at, "no v1 signature"},
		{"another id", "msg_other", ts, specBody, specSignature, at, "no v1 signature"},
		{"another timestamp", specID, strconv.Itoa(specTimestamp + 1), specBody, specSignature, at.Add(time.Second), "no v1 signature"},
		{"another secret", specID, ts, specBody, otherSig, at, "no v1 signature"},
		{"no version", specID, ts, specBody, strings.TrimPrefix(specSignature, "v1,"), at, "no v1 signature"},
		{"too old", specID, ts, specBody, specSignature, at.Add(6 * time.Minute), "away from now"},
		{"too far ahead", specID, ts, specBody, specSignature, at.Add(-6 * time.Minute), "away from now"},
		{"timestamp not a number", specID, "yesterday", specBody, specSignature, at, "not unix seconds"},
		{"missing signature", specID, ts, specBody, "", at, "required"},
		{"full stop in the id", "msg.1", ts, specBody, specSignature, at, "full stop"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := webhooktest.Verify(specSecret, tc.id, tc.ts, []byte(tc.body), tc.header, tc.now)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("Verify: %v, want nil", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("Verify: %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestKeyRefusesWeakSecrets(t *testing.T) {
	for _, s := range []string{"", "whsec_", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_c2hvcnQ=", "whsec_not base64!"} {
		if _, err := webhooktest.Key(s); err == nil {
			t.Errorf("Key(%q) accepted", s)
		}
	}
	if k, err := webhooktest.Key(webhooktest.NewSecret()); err != nil || len(k) != 32 {
		t.Errorf("NewSecret's key: %d bytes, %v", len(k), err)
	}
}

func TestServerAcceptsSignedRequests(t *testing.T) {
	secret := webhooktest.NewSecret()
	srv := webhooktest.NewServer(t, secret)
	resp, err := webhooktest.Post(srv.URL("/ops"), secret, []byte(`{"message":"hi"}`), webhooktest.PostOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != http.StatusOK {
		t.Fatalf("status %d (%s), want 200", resp.Status, resp.Body)
	}
	got := srv.Accepted()
	if len(got) != 1 {
		t.Fatalf("accepted %d requests, want 1", len(got))
	}
	r := got[0]
	if r.Path != "/ops" || r.ID != resp.ID || r.Payload["message"] != "hi" || len(r.Signatures) != 1 || !r.Verified {
		t.Errorf("recorded %+v", r)
	}
}

func TestServerRefuses(t *testing.T) {
	secret := webhooktest.NewSecret()
	srv := webhooktest.NewServer(t, secret)
	body := []byte(`{"message":"hi"}`)
	for _, tc := range []struct {
		name    string
		opts    webhooktest.PostOptions
		body    []byte
		want    int
		problem string
	}{
		{"bad signature", webhooktest.PostOptions{BadSignature: true}, body, http.StatusUnauthorized, "no v1 signature"},
		{"old timestamp", webhooktest.PostOptions{Timestamp: time.Now().Add(-10 * time.Minute)}, body, http.StatusUnauthorized, "away from now"},
		{"unsigned", webhooktest.PostOptions{Unsigned: true}, body, http.StatusUnauthorized, "required"},
		{"bearer instead of a signature", webhooktest.PostOptions{Bearer: true}, body, http.StatusUnauthorized, "required"},
		{"not JSON", webhooktest.PostOptions{}, []byte("hi"), http.StatusBadRequest, "not a JSON object"},
		{"not application/json", webhooktest.PostOptions{Header: http.Header{"Content-Type": {"text/plain"}}}, body, http.StatusUnsupportedMediaType, "Content-Type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := webhooktest.Post(srv.URL("/"), secret, tc.body, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Status != tc.want {
				t.Fatalf("status %d, want %d", resp.Status, tc.want)
			}
			reqs := srv.Requests()
			if r := reqs[len(reqs)-1]; r.Accepted() || !strings.Contains(r.Problem, tc.problem) {
				t.Errorf("recorded accepted=%v problem %q, want refused with %q", r.Accepted(), r.Problem, tc.problem)
			}
		})
	}
	if n := len(srv.Accepted()); n != 0 {
		t.Errorf("%d requests accepted", n)
	}
}

func TestServerDeduplicates(t *testing.T) {
	secret := webhooktest.NewSecret()
	srv := webhooktest.NewServer(t, secret)
	first, err := webhooktest.Post(srv.URL("/"), secret, []byte(`{"n":1}`), webhooktest.PostOptions{})
	if err != nil {
		t.Fatal(err)
	}
	again, err := webhooktest.Post(srv.URL("/"), secret, []byte(`{"n":1}`), webhooktest.PostOptions{ID: first.ID, Timestamp: time.Now().Add(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	other, err := webhooktest.Post(srv.URL("/"), secret, []byte(`{"n":2}`), webhooktest.PostOptions{ID: first.ID})
	if err != nil {
		t.Fatal(err)
	}
	if first.Status != 200 || again.Status != 200 || other.Status != http.StatusConflict {
		t.Fatalf("statuses %d, %d, %d; want 200, 200 (a retry), 409 (same id, other body)", first.Status, again.Status, other.Status)
	}
	reqs := srv.Requests()
	if len(srv.Accepted()) != 1 || !reqs[1].Duplicate || reqs[2].Duplicate {
		t.Errorf("accepted %d, duplicates %v %v; want one accepted and the retry marked", len(srv.Accepted()), reqs[1].Duplicate, reqs[2].Duplicate)
	}
}

func TestServerFailNext(t *testing.T) {
	secret := webhooktest.NewSecret()
	srv := webhooktest.NewServer(t, secret)
	srv.FailNext(http.StatusServiceUnavailable, 7*time.Second)
	srv.FailNextWith(http.StatusTooManyRequests, "Wed, 21 Oct 2065 07:28:00 GMT")
	var got []string
	for range 3 {
		resp, err := webhooktest.Post(srv.URL("/"), secret, []byte(`{}`), webhooktest.PostOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, strconv.Itoa(resp.Status)+" "+resp.Header.Get("Retry-After"))
	}
	want := []string{"503 7", "429 Wed, 21 Oct 2065 07:28:00 GMT", "200 "}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("answers %q, want %q", got, want)
	}
	if n := len(srv.Accepted()); n != 1 {
		t.Errorf("%d accepted, want 1 (faults are not deliveries)", n)
	}
}

func TestServerClock(t *testing.T) {
	secret := webhooktest.NewSecret()
	srv := webhooktest.NewServer(t, secret)
	srv.SetClock(func() time.Time { return time.Now().Add(time.Hour) })
	resp, err := webhooktest.Post(srv.URL("/"), secret, []byte(`{}`), webhooktest.PostOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != http.StatusUnauthorized {
		t.Errorf("a request an hour behind the server's clock: %d, want 401", resp.Status)
	}
}

func TestPostOptions(t *testing.T) {
	secret := webhooktest.NewSecret()
	headers := make(chan http.Header, 2)
	ts := newPlain(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { headers <- r.Header.Clone() }))
	if _, err := webhooktest.Post(ts, secret, []byte(`{}`), webhooktest.PostOptions{Bearer: true, NoID: true}); err != nil {
		t.Fatal(err)
	}
	got := <-headers
	if got.Get("Authorization") != "Bearer "+secret || got.Get("webhook-signature") != "" || got.Get("webhook-id") != "" {
		t.Errorf("bearer request headers %v", got)
	}
	if _, err := webhooktest.Post(ts, secret, []byte(`{}`), webhooktest.PostOptions{ID: "msg_1", Timestamp: time.Unix(1700000000, 0)}); err != nil {
		t.Fatal(err)
	}
	want, _ := webhooktest.Sign(secret, "msg_1", 1700000000, []byte(`{}`))
	got = <-headers
	if got.Get("webhook-id") != "msg_1" || got.Get("webhook-timestamp") != "1700000000" || got.Get("webhook-signature") != want {
		t.Errorf("signed request headers %v", got)
	}
}

// newPlain serves h on a local port for the test; it returns the URL.
func newPlain(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestServerOnAcceptAndHangUp: the hook runs for a webhook accepted, before
// its answer; a webhook hung up on is taken (a retry of it is a duplicate)
// and its sender gets a reset connection, not an answer.
func TestServerOnAcceptAndHangUp(t *testing.T) {
	secret := webhooktest.NewSecret()
	srv := webhooktest.NewServer(t, secret)
	const delay = 100 * time.Millisecond
	var hooked atomic.Int32
	srv.OnAccept(func(webhooktest.Request) {
		hooked.Add(1)
		time.Sleep(delay)
	})
	start := time.Now()
	if resp, err := webhooktest.Post(srv.URL("/"), secret, []byte(`{"n":1}`), webhooktest.PostOptions{}); err != nil || resp.Status != http.StatusOK {
		t.Fatalf("post: %+v, %v", resp, err)
	}
	if took, n := time.Since(start), hooked.Load(); took < delay || n != 1 {
		t.Fatalf("answered after %s with the hook run %d times, want after the hook's %s, once", took, n, delay)
	}
	srv.OnAccept(nil)

	srv.HangUpNext(1)
	opts := webhooktest.PostOptions{ID: "msg_hung_up"}
	if resp, err := webhooktest.Post(srv.URL("/"), secret, []byte(`{"n":2}`), opts); err == nil {
		t.Fatalf("answered %d, want the connection reset", resp.Status)
	}
	if resp, err := webhooktest.Post(srv.URL("/"), secret, []byte(`{"n":2}`), opts); err != nil || resp.Status != http.StatusOK {
		t.Fatalf("the retry: %+v, %v", resp, err)
	}
	reqs := srv.Requests()
	if len(reqs) != 3 || !reqs[1].HungUp || !reqs[1].Accepted() || !reqs[2].Duplicate || reqs[2].HungUp {
		t.Errorf("requests %+v: want the second taken and hung up on, its retry a duplicate", reqs)
	}
}
