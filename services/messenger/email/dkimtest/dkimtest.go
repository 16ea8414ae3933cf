// Package dkimtest makes DKIM keys for tests, signs mail with them
// (go-msgauth's dkim.Sign, the real RFC 6376 signature), and publishes
// their public halves in a stub DNS resolver that email.WithLookupTXT
// takes, so the inbound receiver verifies signatures without a network.
package dkimtest

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/emersion/go-msgauth/dkim"
)

// Key is one DKIM signing key of a domain, under a selector.
type Key struct {
	Domain, Selector string
	signer           crypto.Signer
}

// NewKey makes an Ed25519 key (RFC 8463) for domain under selector.
func NewKey(t testing.TB, domain, selector string) *Key {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &Key{Domain: domain, Selector: selector, signer: priv}
}

// NewRSAKey makes a 2048-bit RSA key for domain under selector.
func NewRSAKey(t testing.TB, domain, selector string) *Key {
	t.Helper()
	priv, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return &Key{Domain: domain, Selector: selector, signer: priv}
}

// Name is the DNS name of the key's record: <selector>._domainkey.<domain>.
func (k *Key) Name() string { return k.Selector + "._domainkey." + k.Domain }

// Record is the key's TXT record, as a domain publishes it.
func (k *Key) Record(t testing.TB) string {
	t.Helper()
	switch pub := k.signer.Public().(type) {
	case ed25519.PublicKey:
		return "v=DKIM1; k=ed25519; p=" + base64.StdEncoding.EncodeToString(pub)
	default:
		der, err := x509.MarshalPKIXPublicKey(pub)
		if err != nil {
			t.Fatal(err)
		}
		return "v=DKIM1; k=rsa; p=" + base64.StdEncoding.EncodeToString(der)
	}
}

// Sign returns msg (CRLF lines) with a DKIM-Signature of the key's domain
// on top, covering every header field and the body, canonicalized
// relaxed/relaxed as the big mail providers sign.
func (k *Key) Sign(t testing.TB, msg string) string {
	t.Helper()
	var b bytes.Buffer
	err := dkim.Sign(&b, strings.NewReader(msg), &dkim.SignOptions{
		Domain: k.Domain, Selector: k.Selector, Signer: k.signer,
		HeaderCanonicalization: dkim.CanonicalizationRelaxed, BodyCanonicalization: dkim.CanonicalizationRelaxed,
	})
	if err != nil {
		t.Fatalf("dkim.Sign: %v", err)
	}
	return b.String()
}

// Resolver answers TXT look-ups from what tests published in it; any other
// name does not exist (NXDOMAIN).
type Resolver struct {
	mu      sync.Mutex
	txt     map[string][]string
	fail    map[string]error
	lookups []string
}

// NewResolver returns a resolver with nothing published.
func NewResolver() *Resolver {
	return &Resolver{txt: map[string][]string{}, fail: map[string]error{}}
}

// Publish puts k's record at its name (replacing any failure set there).
func (r *Resolver) Publish(t testing.TB, k *Key) {
	t.Helper()
	r.Set(k.Name(), k.Record(t))
}

// Set makes name answer records.
func (r *Resolver) Set(name string, records ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.fail, strings.ToLower(name))
	r.txt[strings.ToLower(name)] = records
}

// FailTemporarily makes look-ups of name fail as a DNS server that does not
// answer would (SERVFAIL, a timeout): an error to try again later.
func (r *Resolver) FailTemporarily(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fail[strings.ToLower(name)] = &net.DNSError{Err: "server misbehaving", Name: name, IsTemporary: true}
}

// Lookups are the names looked up so far, in order.
func (r *Resolver) Lookups() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.lookups...)
}

// LookupTXT is net.Resolver.LookupTXT over what was published.
func (r *Resolver) LookupTXT(ctx context.Context, name string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	key := strings.ToLower(strings.TrimSuffix(name, "."))
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lookups = append(r.lookups, name)
	if err := r.fail[key]; err != nil {
		return nil, err
	}
	if recs, ok := r.txt[key]; ok {
		return append([]string(nil), recs...), nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: name, IsNotFound: true}
}
