package email_test

import (
	"strings"
	"testing"

	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/messenger/email"
	"github.com/heraldhq/herald/services/messenger/email/dkimtest"
)

// authMail is a person's mail, before anyone signs it.
const authMail = `From: "Ann Example" <ann@example.org>
To: Herald <herald@example.com>
Subject: Lunch on Friday?
Message-ID: <auth-1@example.org>
Date: Mon, 02 Jan 2006 15:04:05 +0000
MIME-Version: 1.0
Content-Type: text/plain; charset=utf-8

Shall we meet at noon?
`

// trustedRelay is the authserv-id the tests' integration trusts, written
// in another case than the headers use: ids compare without case.
const trustedRelay = "MX.Example.NET"

// authIntegration is inboundIntegration trusting one relay.
func authIntegration() config.Integration {
	in := inboundIntegration()
	in.Settings.(*email.Config).Inbound.TrustedRelays = []string{trustedRelay}
	return in
}

// keys are DKIM keys of the tests' domains, published in a stub resolver
// (the unpublished one is not).
type keys struct {
	dns                                   *dkimtest.Resolver
	ann, annRSA, evil, lookalike, retired *dkimtest.Key
}

func newKeys(t *testing.T) *keys {
	k := &keys{
		dns:       dkimtest.NewResolver(),
		ann:       dkimtest.NewKey(t, "example.org", "s1"),
		annRSA:    dkimtest.NewRSAKey(t, "example.org", "rsa1"),
		evil:      dkimtest.NewKey(t, "evil.example", "s1"),
		lookalike: dkimtest.NewKey(t, "ample.org", "s1"),
		retired:   dkimtest.NewKey(t, "example.org", "retired"),
	}
	for _, key := range []*dkimtest.Key{k.ann, k.annRSA, k.evil, k.lookalike} {
		k.dns.Publish(t, key)
	}
	return k
}

// TestSenderAuthentication: a From address is the sender's identity only
// when an aligned DKIM signature verifies or a trusted relay says
// dmarc=pass; anything else reaches the switchboard as unverified:<address>,
// which no allow_from entry names.
func TestSenderAuthentication(t *testing.T) {
	k := newKeys(t)
	mail := crlf(authMail)
	signed := k.ann.Sign(t, mail)
	relay := func(verdict string) string {
		return "Authentication-Results: mx.example.net;\r\n spf=pass smtp.mailfrom=example.org;\r\n dkim=pass header.d=example.org;\r\n " + verdict + "\r\n"
	}
	const unverifiedAnn = email.UnverifiedPrefix + "ann@example.org"

	tests := []struct {
		name     string
		msg      string
		identity string // source_sender_identity and meta user_id
		address  string // meta chat_id; "" means ann@example.org
		auth     string // meta sender_auth
	}{
		{"aligned Ed25519 signature", signed, "ann@example.org", "", "dkim"},
		{"aligned RSA signature", k.annRSA.Sign(t, mail), "ann@example.org", "", "dkim"},
		{"signature of the parent domain (relaxed alignment)", k.ann.Sign(t, strings.Replace(mail, "ann@example.org", "ann@mail.example.org", 1)),
			"ann@mail.example.org", "ann@mail.example.org", "dkim"},
		{"body changed after signing", strings.Replace(signed, "noon", "midnight", 1), unverifiedAnn, "", "dkim_fail"},
		{"From changed after signing", strings.Replace(signed, "ann@example.org", "bob@example.org", 1),
			email.UnverifiedPrefix + "bob@example.org", "bob@example.org", "dkim_fail"},
		{"signing key not published", k.retired.Sign(t, mail), unverifiedAnn, "", "dkim_fail"},
		{"signature by another domain", k.evil.Sign(t, mail), unverifiedAnn, "", "not_aligned"},
		{"signature by a look-alike domain", k.lookalike.Sign(t, mail), unverifiedAnn, "", "not_aligned"},
		{"no signature", mail, unverifiedAnn, "", "no_signature"},
		{"no From header", k.ann.Sign(t, strings.Replace(mail, "From: \"Ann Example\" <ann@example.org>\r\n", "", 1)),
			email.UnverifiedPrefix + "bounce@example.org", "bounce@example.org", "no_from"},
		// Ann may sign her own mail; a second From above it must not make
		// that signature speak for her boss.
		{"a From added above a signed mail", "From: boss@example.org\r\n" + signed,
			email.UnverifiedPrefix + "boss@example.org", "boss@example.org", "from_ambiguous"},
		// DKIM reads "From :" as a From (and relaxed canonicalization
		// keeps the signature valid); net/mail reads it as another field
		// and would see boss's From alone.
		{"a signed From renamed with a space, another From above",
			"From: boss@example.org\r\n" + strings.Replace(signed, "From: \"Ann", "From : \"Ann", 1),
			email.UnverifiedPrefix + "boss@example.org", "boss@example.org", "from_ambiguous"},
		{"a signed address that looks unverified", k.ann.Sign(t, strings.Replace(mail, "<ann@example.org>", "<\"unverified:ann\"@example.org>", 1)),
			email.UnverifiedPrefix + unverifiedAnn, unverifiedAnn, "from_ambiguous"},
		{"two addresses in From", k.ann.Sign(t, strings.Replace(mail, "<ann@example.org>", "<ann@example.org>, boss@example.org", 1)),
			unverifiedAnn, "", "from_ambiguous"},
		{"trusted relay: dmarc=pass", relay("dmarc=pass (p=reject dis=none) header.from=example.org") + mail, "ann@example.org", "", "relay"},
		{"trusted relay: dmarc=pass, From domain in capitals", relay("dmarc=pass header.from=Example.ORG") + mail, "ann@example.org", "", "relay"},
		{"untrusted relay: dmarc=pass", "Authentication-Results: mx.attacker.example; dmarc=pass header.from=example.org\r\n" + mail,
			unverifiedAnn, "", "relay_untrusted"},
		{"trusted relay: dmarc=fail", relay("dmarc=fail (p=none) header.from=example.org") + mail, unverifiedAnn, "", "relay_fail"},
		{"trusted relay: no DMARC verdict", "Authentication-Results: mx.example.net; spf=pass smtp.mailfrom=example.org\r\n" + mail,
			unverifiedAnn, "", "relay_fail"},
		{"trusted relay: dmarc=pass for another domain", relay("dmarc=pass header.from=evil.example") + mail, unverifiedAnn, "", "relay_fail"},
		// Only the topmost Authentication-Results count: the ones below
		// were written by earlier hops or by the sender.
		{"the trusted id below an untrusted relay's header",
			"Authentication-Results: mx.other.example; dmarc=none\r\n" + relay("dmarc=pass header.from=example.org") + mail,
			unverifiedAnn, "", "relay_untrusted"},
		{"a forged pass below the trusted relay's fail",
			relay("dmarc=fail header.from=example.org") + relay("dmarc=pass header.from=example.org") + mail,
			unverifiedAnn, "", "relay_fail"},
		{"trusted relay's fail, but an aligned signature verifies here", relay("dmarc=fail header.from=example.org") + signed,
			"ann@example.org", "", "dkim"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, _ := runReceiver(t, authIntegration(), nil, nil, email.WithLookupTXT(k.dns.LookupTXT))
			mustSend(t, listening(t, rec), "bounce@example.org", []string{"herald@example.com"}, tt.msg)

			in := oneIngress(t, rec)
			address := tt.address
			if address == "" {
				address = "ann@example.org"
			}
			authenticated := "false"
			if tt.auth == "dkim" || tt.auth == "relay" {
				authenticated = "true"
			}
			got := map[string]string{
				"source_sender_identity": in.RequestContext.SourceSenderIdentity,
				"user_id":                in.Meta["user_id"],
				"chat_id":                in.Meta["chat_id"],
				"sender_authenticated":   in.Meta["sender_authenticated"],
				"sender_auth":            in.Meta["sender_auth"],
			}
			diffMeta(t, got, map[string]string{
				"source_sender_identity": tt.identity,
				"user_id":                tt.identity,
				"chat_id":                address,
				"sender_authenticated":   authenticated,
				"sender_auth":            tt.auth,
			})
		})
	}
}

// TestUnauthenticatedSenderIsLogged: the reason is logged with the mail's
// request_id (which the switchboard's audit record of the refusal names),
// and nothing of what the mail says.
func TestUnauthenticatedSenderIsLogged(t *testing.T) {
	k := newKeys(t)
	logs := &testkit.Buffer{}
	rec, _ := runReceiver(t, authIntegration(), nil, logs, email.WithLookupTXT(k.dns.LookupTXT))
	tampered := strings.Replace(k.ann.Sign(t, crlf(authMail)), "noon", "midnight", 1)
	mustSend(t, listening(t, rec), "ann@example.org", []string{"herald@example.com"}, tampered)

	in := oneIngress(t, rec)
	out := logs.String()
	for _, want := range []string{"sender not authenticated", "sender_auth=dkim_fail", "by=example.org", "body hash did not verify",
		"from=ann@example.org", "request_id=" + in.RequestContext.RequestID} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	for _, secret := range []string{"midnight", "Lunch on Friday"} {
		if strings.Contains(out, secret) {
			t.Errorf("log carries the mail's content %q:\n%s", secret, out)
		}
	}
}

// TestDKIMKeyUnavailableIsRetried: when the key of an aligned signature
// cannot be fetched just now, the mail is answered 451, so the sending
// server brings it back later, rather than taken as a stranger's; once the
// key resolves it goes through authenticated.
func TestDKIMKeyUnavailableIsRetried(t *testing.T) {
	k := newKeys(t)
	rec, _ := runReceiver(t, authIntegration(), nil, nil, email.WithLookupTXT(k.dns.LookupTXT))
	addr := listening(t, rec)
	signed := k.ann.Sign(t, crlf(authMail))

	k.dns.FailTemporarily(k.ann.Name())
	stage, err := sendMail(t, addr, "ann@example.org", []string{"herald@example.com"}, signed)
	if stage != "DATA" || smtpCode(err) != 451 {
		t.Fatalf("answered %v at %q, want 451 at DATA", err, stage)
	}
	if n := len(rec.ingresses()); n != 0 {
		t.Fatalf("%d ingress envelopes reached the sink while the key was unavailable, want none", n)
	}

	k.dns.Publish(t, k.ann)
	mustSend(t, addr, "ann@example.org", []string{"herald@example.com"}, signed)
	if in := oneIngress(t, rec); in.RequestContext.SourceSenderIdentity != "ann@example.org" || in.Meta["sender_auth"] != "dkim" {
		t.Errorf("retried mail from %q (sender_auth %q), want ann@example.org authenticated by dkim",
			in.RequestContext.SourceSenderIdentity, in.Meta["sender_auth"])
	}
}
