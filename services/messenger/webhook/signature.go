package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"hash"
	"strconv"
	"strings"
	"time"
)

// The Standard Webhooks headers.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

const (
	// SecretPrefix marks a Standard Webhooks symmetric secret: "whsec_"
	// followed by the base64 of the key.
	SecretPrefix = "whsec_"
	// MinKeyBytes is the shortest key accepted, the specification's minimum
	// (192 bits).
	MinKeyBytes = 24
	// Tolerance is how far a signed request's webhook-timestamp may be from
	// now, either way, before it is refused as a possible replay.
	Tolerance = 5 * time.Minute
	// maxSignatures bounds the entries of webhook-signature that are tried:
	// a rotation sends two or three, never dozens.
	maxSignatures = 8
	// maxIDLength bounds webhook-id (and with it the native id).
	maxIDLength = 256
)

// errSecret is what a malformed secret is, with no part of it in the message.
var errSecret = errors.New("it is not a Standard Webhooks secret: write whsec_ followed by the base64 of at least 24 random bytes (make one with: echo whsec_$(openssl rand -base64 32)); several secrets, separated by spaces, sign with each and accept any (for a rotation)")

// secrets are an integration's keys: the first signs, every one verifies
// and signs too, so a receiver that knows only the old or only the new key
// of a rotation accepts what Herald sends.
type secrets struct {
	raw  []string // as configured: what a bearer token is compared with
	keys [][]byte
}

// parseSecrets reads the value of secret_env: one or more secrets separated
// by white space, each "whsec_" + base64 (the prefix may be left out, as
// the Standard Webhooks libraries allow).
func parseSecrets(value string) (*secrets, error) {
	s := &secrets{}
	for _, f := range strings.Fields(value) {
		key, err := decodeSecret(f)
		if err != nil {
			return nil, err
		}
		s.raw = append(s.raw, f)
		s.keys = append(s.keys, key)
	}
	if len(s.keys) == 0 {
		return nil, errSecret
	}
	return s, nil
}

func decodeSecret(secret string) ([]byte, error) {
	b64 := strings.TrimPrefix(secret, SecretPrefix)
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		key, err = base64.RawStdEncoding.DecodeString(b64)
	}
	if err != nil || len(key) < MinKeyBytes {
		return nil, errSecret
	}
	return key, nil
}

// mac is the HMAC-SHA256 of "<id>.<timestamp>.<body>" under key.
func mac(key []byte, id, timestamp string, body []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(id))
	h.Write([]byte{'.'})
	h.Write([]byte(timestamp))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// sign is the value of webhook-signature for a message: "v1,<base64>", one
// per key, separated by spaces.
func (s *secrets) sign(id string, timestamp time.Time, body []byte) string {
	g := s.signer(id, timestamp)
	g.Write(body)
	return g.header()
}

// signer is sign taking the body as it is written, so that a multipart
// body of large files is signed as it goes to disk, never whole in memory.
type signer []hash.Hash

// signer starts the MACs of "<id>.<timestamp>.<body>" under every key; the
// body is what is written to it.
func (s *secrets) signer(id string, timestamp time.Time) signer {
	prefix := id + "." + strconv.FormatInt(timestamp.Unix(), 10) + "."
	g := make(signer, len(s.keys))
	for i, k := range s.keys {
		g[i] = hmac.New(sha256.New, k)
		g[i].Write([]byte(prefix))
	}
	return g
}

// Write adds p to the body signed; it never fails.
func (g signer) Write(p []byte) (int, error) {
	for _, h := range g {
		h.Write(p)
	}
	return len(p), nil
}

// header is the value of webhook-signature for the body written.
func (g signer) header() string {
	sigs := make([]string, len(g))
	for i, h := range g {
		sigs[i] = "v1," + base64.StdEncoding.EncodeToString(h.Sum(nil))
	}
	return strings.Join(sigs, " ")
}

// verify reports whether one of the v1 signatures of header is the MAC of
// the message under one of the keys. Entries of other schemes (v1a) are
// skipped; the comparison takes the same time wherever they differ.
func (s *secrets) verify(id, timestamp string, body []byte, header string) bool {
	var given [][]byte
	for _, f := range strings.Fields(header) {
		scheme, sig, ok := strings.Cut(f, ",")
		if !ok || scheme != "v1" {
			continue
		}
		b, err := base64.StdEncoding.DecodeString(sig)
		if err != nil || len(b) != sha256.Size {
			continue
		}
		if given = append(given, b); len(given) == maxSignatures {
			break
		}
	}
	ok := false
	for _, k := range s.keys {
		want := mac(k, id, timestamp, body)
		for _, g := range given {
			// No early return: every pair is compared.
			ok = hmac.Equal(g, want) || ok
		}
	}
	return ok
}

// bearer reports whether token is one of the configured secrets, in
// constant time (comparing hashes, so not even the length leaks).
func (s *secrets) bearer(token string) bool {
	got := sha256.Sum256([]byte(token))
	ok := 0
	for _, r := range s.raw {
		want := sha256.Sum256([]byte(r))
		ok |= subtle.ConstantTimeCompare(got[:], want[:])
	}
	return ok == 1
}

// validID reports whether a webhook-id can be used: 1 to 256 printable
// ASCII characters without spaces, and no full stop, which the
// specification forbids because the signed content is delimited by them.
func validID(id string) bool {
	if id == "" || len(id) > maxIDLength {
		return false
	}
	for i := range len(id) {
		if c := id[i]; c <= ' ' || c > '~' || c == '.' {
			return false
		}
	}
	return true
}

// parseTimestamp reads webhook-timestamp: unix seconds, digits only.
func parseTimestamp(ts string) (time.Time, bool) {
	if ts == "" || len(ts) > 12 {
		return time.Time{}, false
	}
	for i := range len(ts) {
		if ts[i] < '0' || ts[i] > '9' {
			return time.Time{}, false
		}
	}
	n, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(n, 0), true
}
