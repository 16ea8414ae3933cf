package dkimtest_test

import (
	"context"
	"strings"
	"testing"

	"github.com/emersion/go-msgauth/dkim"

	"github.com/heraldhq/herald/services/messenger/email/dkimtest"
)

const msg = "From: ann@example.org\r\nTo: herald@example.com\r\nSubject: hi\r\n\r\nHello.\r\n"

func verify(t *testing.T, r *dkimtest.Resolver, signed string) *dkim.Verification {
	t.Helper()
	vs, err := dkim.VerifyWithOptions(strings.NewReader(signed), &dkim.VerifyOptions{
		LookupTXT: func(name string) ([]string, error) { return r.LookupTXT(context.Background(), name) },
	})
	if err != nil || len(vs) != 1 {
		t.Fatalf("VerifyWithOptions: %d verifications, %v; want 1", len(vs), err)
	}
	return vs[0]
}

func TestSignedMailVerifies(t *testing.T) {
	for _, k := range []*dkimtest.Key{dkimtest.NewKey(t, "example.org", "ed"), dkimtest.NewRSAKey(t, "example.org", "rsa")} {
		t.Run(k.Selector, func(t *testing.T) {
			r := dkimtest.NewResolver()
			r.Publish(t, k)
			signed := k.Sign(t, msg)
			if !strings.HasPrefix(signed, "DKIM-Signature: ") || !strings.HasSuffix(signed, msg) {
				t.Fatalf("signed mail is not the mail under a DKIM-Signature:\n%s", signed)
			}
			if v := verify(t, r, signed); v.Err != nil || v.Domain != "example.org" {
				t.Errorf("verification %+v, want a pass for example.org", v)
			}
			if got := r.Lookups(); len(got) != 1 || got[0] != k.Selector+"._domainkey.example.org" {
				t.Errorf("lookups %q, want the key's record only", got)
			}
		})
	}
}

func TestResolverFailures(t *testing.T) {
	k := dkimtest.NewKey(t, "example.org", "s1")
	signed := k.Sign(t, msg)

	r := dkimtest.NewResolver()
	if v := verify(t, r, signed); !dkim.IsPermFail(v.Err) {
		t.Errorf("unpublished key: %v, want a permanent failure", v.Err)
	}
	r.FailTemporarily(k.Name())
	if v := verify(t, r, signed); !dkim.IsTempFail(v.Err) {
		t.Errorf("DNS down: %v, want a temporary failure", v.Err)
	}
	r.Publish(t, k)
	if v := verify(t, r, signed); v.Err != nil {
		t.Errorf("published again: %v, want a pass", v.Err)
	}
}
