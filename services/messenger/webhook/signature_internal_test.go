package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/services/messenger/webhook/webhooktest"
)

// Known answers: the Standard Webhooks specification's published test
// vector, and one derived outside Go (Python's hmac, openssl) from the key
// 00 01 … 1f, derived again here with crypto/hmac directly.
var knownAnswers = []struct {
	name, secret, id string
	ts               int64
	body, want       string
}{
	{"specification vector", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330,
		`{"test": 2432232314}`, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="},
	{"hand-derived vector", "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=", "msg_herald_kat", 1700000000,
		`{"text":"Build 812 failed"}`, "v1,F0uUiEQnDS51j/GfgXDnKcCJlUy45kijEQsW9W8qW6o="},
}

func TestSignKnownAnswers(t *testing.T) {
	for _, tc := range knownAnswers {
		t.Run(tc.name, func(t *testing.T) {
			s, err := parseSecrets(tc.secret)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.sign(tc.id, time.Unix(tc.ts, 0), []byte(tc.body)); got != tc.want {
				t.Errorf("sign = %s, want %s", got, tc.want)
			}
			ts := strconv.FormatInt(tc.ts, 10)
			if !s.verify(tc.id, ts, []byte(tc.body), tc.want) {
				t.Error("verify refuses the known answer")
			}
			// Independently: the key is the base64 after whsec_, the
			// content "<id>.<timestamp>.<body>".
			key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(tc.secret, "whsec_"))
			if err != nil {
				t.Fatal(err)
			}
			h := hmac.New(sha256.New, key)
			h.Write([]byte(tc.id + "." + ts + "." + tc.body))
			if byHand := "v1," + base64.StdEncoding.EncodeToString(h.Sum(nil)); byHand != tc.want {
				t.Errorf("crypto/hmac gives %s, the known answer is %s", byHand, tc.want)
			}
		})
	}
}

// TestSignaturesAgreeWithWebhooktest checks this package against the fake's
// own implementation, both ways, on fresh secrets.
func TestSignaturesAgreeWithWebhooktest(t *testing.T) {
	secret := webhooktest.NewSecret()
	s, err := parseSecrets(secret)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	body := []byte(`{"text":"héllo","n":1}`)
	sig := s.sign("dlv_abc", now, body)
	if err := webhooktest.Verify(secret, "dlv_abc", strconv.FormatInt(now.Unix(), 10), body, sig, now); err != nil {
		t.Errorf("webhooktest refuses this package's signature: %v", err)
	}
	theirs, err := webhooktest.Sign(secret, "msg_1", now.Unix(), body)
	if err != nil {
		t.Fatal(err)
	}
	if !s.verify("msg_1", strconv.FormatInt(now.Unix(), 10), body, theirs) {
		t.Error("this package refuses webhooktest's signature")
	}
}

func TestVerifyRefuses(t *testing.T) {
	ka := knownAnswers[0]
	s, err := parseSecrets(ka.secret)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := parseSecrets(webhooktest.NewSecret())
	ts := strconv.FormatInt(ka.ts, 10)
	otherSig := other.sign(ka.id, time.Unix(ka.ts, 0), []byte(ka.body))
	for _, tc := range []struct {
		name, id, ts, body, header string
		want                       bool
	}{
		{"valid", ka.id, ts, ka.body, ka.want, true},
		{"valid among others (rotation)", ka.id, ts, ka.body, otherSig + " v1a,AAAA " + ka.want, true},
		{"altered body", ka.id, ts, ka.body + " ", ka.want, false},
		{"another id", "msg_x", ts, ka.body, ka.want, false},
		{"another timestamp", ka.id, "1614265331", ka.body, ka.want, false},
		{"another key", ka.id, ts, ka.body, otherSig, false},
		{"no scheme", ka.id, ts, ka.body, strings.TrimPrefix(ka.want, "v1,"), false},
		{"other scheme", ka.id, ts, ka.body, "v2" + strings.TrimPrefix(ka.want, "v1"), false},
		{"truncated", ka.id, ts, ka.body, ka.want[:len(ka.want)-4], false},
		{"not base64", ka.id, ts, ka.body, "v1,!!!!", false},
		{"empty", ka.id, ts, ka.body, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := s.verify(tc.id, tc.ts, []byte(tc.body), tc.header); got != tc.want {
				t.Errorf("verify = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestParseSecrets(t *testing.T) {
	ka := knownAnswers[0]
	for _, tc := range []struct {
		name, value string
		keys        int
	}{
		{"whsec_ secret", ka.secret, 1},
		{"without the prefix", strings.TrimPrefix(ka.secret, "whsec_"), 1},
		{"without padding", "whsec_" + base64.RawStdEncoding.EncodeToString(make([]byte, 32)), 1},
		{"rotation: two secrets", ka.secret + "  " + knownAnswers[1].secret + "\n", 2},
		{"empty", "", 0},
		{"prefix only", "whsec_", 0},
		{"too short", "whsec_" + base64.StdEncoding.EncodeToString(make([]byte, 16)), 0},
		{"not base64", "whsec_not*base64*at*all*not*base64*at*all", 0},
		{"one bad of two", ka.secret + " whsec_c2hvcnQ=", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := parseSecrets(tc.value)
			if tc.keys == 0 {
				if err == nil {
					t.Fatal("accepted")
				}
				for _, f := range strings.Fields(tc.value) {
					if f = strings.TrimPrefix(f, "whsec_"); len(f) >= 8 && strings.Contains(err.Error(), f) {
						t.Errorf("the error repeats the secret: %v", err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(s.keys) != tc.keys {
				t.Errorf("%d keys, want %d", len(s.keys), tc.keys)
			}
		})
	}
}

func TestSignWithEveryKey(t *testing.T) {
	s, err := parseSecrets(knownAnswers[0].secret + " " + knownAnswers[1].secret)
	if err != nil {
		t.Fatal(err)
	}
	ka := knownAnswers[1]
	sigs := strings.Fields(s.sign(ka.id, time.Unix(ka.ts, 0), []byte(ka.body)))
	if len(sigs) != 2 || sigs[1] != ka.want {
		t.Errorf("signatures %q, want two, the second %s", sigs, ka.want)
	}
}

func TestBearer(t *testing.T) {
	s, err := parseSecrets(knownAnswers[0].secret + " " + knownAnswers[1].secret)
	if err != nil {
		t.Fatal(err)
	}
	for token, want := range map[string]bool{
		knownAnswers[0].secret:       true,
		knownAnswers[1].secret:       true,
		knownAnswers[0].secret + "x": false,
		knownAnswers[0].secret[:20]:  false,
		"":                           false,
	} {
		if got := s.bearer(token); got != want {
			t.Errorf("bearer(%.12q…) = %v, want %v", token, got, want)
		}
	}
}

func TestValidID(t *testing.T) {
	for id, want := range map[string]bool{
		"msg_2KWPBgLlAfxdpx2AI54pPJ85f4W":      true,
		"dlv_0123456789abcdef0123456789":       true,
		"0190f6b2-4c1e-7e3a-9b1d-2f0e7a1c9d00": true,
		"":                                     false,
		"msg.1":                                false,
		"msg 1":                                false,
		"msg\n1":                               false,
		"msgé":                                 false,
		strings.Repeat("a", 256):               true,
		strings.Repeat("a", 257):               false,
	} {
		if got := validID(id); got != want {
			t.Errorf("validID(%.20q) = %v, want %v", id, got, want)
		}
	}
}
