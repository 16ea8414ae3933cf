package webhooktest

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// This file is written from the Standard Webhooks specification alone, apart
// from the webhook package, so that each checks the other.

// Tolerance is how far a webhook-timestamp may be from the server's clock.
const Tolerance = 5 * time.Minute

// NewSecret is a fresh Standard Webhooks secret: "whsec_" + base64 of 32
// random bytes.
func NewSecret() string {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	return "whsec_" + base64.StdEncoding.EncodeToString(key)
}

// Key is the HMAC key of a secret: the base64 after "whsec_", decoded.
func Key(secret string) ([]byte, error) {
	rest, ok := strings.CutPrefix(secret, "whsec_")
	if !ok {
		return nil, errors.New(`a Standard Webhooks secret starts with "whsec_"`)
	}
	key, err := base64.StdEncoding.DecodeString(rest)
	if err != nil {
		return nil, fmt.Errorf("the part after whsec_ is not base64: %w", err)
	}
	if len(key) < 24 {
		return nil, fmt.Errorf("the key is %d bytes; the specification asks for at least 24", len(key))
	}
	return key, nil
}

// Sign is the webhook-signature value ("v1,<base64>") of a message: the
// HMAC-SHA256 of "<id>.<timestamp>.<body>" under the secret's key.
func Sign(secret, id string, timestamp int64, body []byte) (string, error) {
	key, err := Key(secret)
	if err != nil {
		return "", err
	}
	content := id + "." + strconv.FormatInt(timestamp, 10) + "." + string(body)
	h := hmac.New(sha256.New, key)
	h.Write([]byte(content))
	return "v1," + base64.StdEncoding.EncodeToString(h.Sum(nil)), nil
}

// Verify checks a webhook-signature header (space-separated signatures,
// any v1 one matching is enough) for the message, and its timestamp
// against now. It says what is wrong.
func Verify(secret, id, timestamp string, body []byte, header string, now time.Time) error {
	if id == "" || timestamp == "" || header == "" {
		return errors.New("webhook-id, webhook-timestamp and webhook-signature are all required")
	}
	if strings.Contains(id, ".") {
		return errors.New("webhook-id contains a full stop")
	}
	ts, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return fmt.Errorf("webhook-timestamp %q is not unix seconds", timestamp)
	}
	want, err := Sign(secret, id, ts, body)
	if err != nil {
		return err
	}
	_, wantMAC, _ := strings.Cut(want, ",")
	wantBytes, _ := base64.StdEncoding.DecodeString(wantMAC)
	matched := false
	for _, sig := range strings.Split(header, " ") {
		version, value, ok := strings.Cut(sig, ",")
		if !ok || version != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(value)
		if err != nil {
			continue
		}
		if hmac.Equal(got, wantBytes) {
			matched = true
		}
	}
	if !matched {
		return errors.New("no v1 signature matches")
	}
	if off := now.Sub(time.Unix(ts, 0)); off > Tolerance || off < -Tolerance {
		return fmt.Errorf("webhook-timestamp is %s away from now", off.Round(time.Second))
	}
	return nil
}
