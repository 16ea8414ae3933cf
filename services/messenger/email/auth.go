package email

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"time"

	"github.com/emersion/go-msgauth/authres"
	"github.com/emersion/go-msgauth/dkim"
)

// Anyone can write any From header, so a mail's From address is its
// sender's identity only when something vouches for it: a DKIM signature
// of the From domain that verifies (RFC 6376, aligned as DMARC's relaxed
// mode asks, RFC 7489 §3.1.1), or the DMARC verdict of a relay the
// operator trusts (inbound.trusted_relays), read from the
// Authentication-Results header it added (RFC 8601). A mail nothing vouches
// for still reaches the switchboard, but as someone no allow_from entry
// names: UnverifiedPrefix before the address.

// UnverifiedPrefix starts the source_sender_identity (and meta user_id) of
// a mail whose From address is not authenticated, so that it never equals
// an allow_from, approvers or paired address: the switchboard treats the
// sender as a stranger (refused, or a pairing code under dm_policy
// pairing). meta chat_id keeps the bare address, where a pairing code or a
// reply goes.
const UnverifiedPrefix = "unverified:"

// Meta keys of sender authentication.
const (
	// MetaSenderAuthenticated is "true" when the From address is
	// authenticated, else "false".
	MetaSenderAuthenticated = "sender_authenticated"
	// MetaSenderAuth says how it was authenticated (authDKIM, authRelay)
	// or why it was not (one of the other auth* values).
	MetaSenderAuth = "sender_auth"
)

// What MetaSenderAuth says.
const (
	authDKIM           = "dkim"            // an aligned DKIM signature verified
	authRelay          = "relay"           // a trusted relay's Authentication-Results say dmarc=pass
	authNoFrom         = "no_from"         // no From address at all
	authFromAmbiguous  = "from_ambiguous"  // several From headers or addresses, one that does not parse strictly, or one that starts with UnverifiedPrefix
	authNoSignature    = "no_signature"    // no DKIM-Signature, no Authentication-Results
	authDKIMFail       = "dkim_fail"       // an aligned signature did not verify
	authDKIMTempFail   = "dkim_temperror"  // an aligned signature's key could not be fetched just now (answered 451)
	authNotAligned     = "not_aligned"     // signatures, but none by the From domain
	authRelayUntrusted = "relay_untrusted" // the topmost Authentication-Results are not from a trusted relay
	authRelayFail      = "relay_fail"      // a trusted relay said anything but dmarc=pass for the From domain
	authNotChecked     = "not_checked"     // the mail was dropped before it was checked
)

const (
	// maxSignatures bounds the DKIM signatures checked in one mail: each
	// costs a DNS query and a pass over the body.
	maxSignatures = 5
	// dkimTimeout bounds the key lookups of one mail.
	dkimTimeout = 10 * time.Second
	// maxAuthDetail bounds what of a signature's or relay's words is logged.
	maxAuthDetail = 200
)

// LookupTXT fetches the TXT records of a DNS name, like
// net.Resolver.LookupTXT.
type LookupTXT func(ctx context.Context, name string) ([]string, error)

// senderAuth is what could be established about a mail's From address.
type senderAuth struct {
	ok bool
	// how is authDKIM or authRelay when ok, else why not.
	how string
	// by is who vouched or failed to: the signature's d= domain, or the
	// relay's authserv-id.
	by string
	// detail is the verifier's or relay's own words, for the log.
	detail string
	// retry is set when an aligned signature could not be checked for now
	// (its key did not resolve): the mail is answered 451, so it is checked
	// again later rather than taken as a stranger's.
	retry bool
}

// meta is how a sets the ingress's meta.
func (a senderAuth) meta() (authenticated, how string) {
	if a.ok {
		return "true", a.how
	}
	return "false", a.how
}

// authenticate checks the From address of m (raw as received).
//
// A trusted relay's verdict is read first; then the DKIM signatures. When
// neither vouches, the reason given is the most telling one: a trusted
// relay's failure, then a signature of the From domain that failed, then
// signatures of other domains only, then Authentication-Results from
// someone untrusted, else no signature at all.
func (r *Receiver) authenticate(ctx context.Context, m *parsedMail, raw []byte) senderAuth {
	if m.fromAddr == "" {
		return senderAuth{how: authNoFrom}
	}
	// An address that itself starts with the prefix ("unverified:ann"@,
	// quoted) could pass for an unverified one in allow_from.
	if !m.fromUnique || dkimFromFields(raw) != 1 || strings.HasPrefix(m.fromAddr, UnverifiedPrefix) {
		return senderAuth{how: authFromAmbiguous}
	}
	domain := m.fromAddr[strings.LastIndexByte(m.fromAddr, '@')+1:]
	relay := r.relayVerdict(m.authResults, domain)
	if relay.ok {
		return relay
	}
	sig := r.verifyDKIM(ctx, raw, domain)
	switch {
	case sig.ok || sig.retry:
		return sig
	case relay.how == authRelayFail:
		return relay
	case sig.how != authNoSignature:
		return sig
	case relay.how != "":
		return relay
	}
	return sig
}

// dkimFromFields counts the header fields of raw that DKIM takes for a
// From: go-msgauth names a field by the text before its first colon,
// trimmed, in any case, where net/mail may read the field otherwise or not
// at all. With exactly one such field, the From a signature covers is the
// From parseMail read.
func dkimFromFields(raw []byte) int {
	n := 0
	for len(raw) > 0 {
		var line []byte
		line, raw, _ = bytes.Cut(raw, []byte("\n"))
		line = bytes.TrimSuffix(line, []byte("\r"))
		switch {
		case len(line) == 0:
			return n // the end of the header
		case line[0] == ' ' || line[0] == '\t':
			continue // a folded line of the field before
		}
		name, _, _ := bytes.Cut(line, []byte(":"))
		if strings.EqualFold(string(bytes.TrimSpace(name)), "from") {
			n++
		}
	}
	return n
}

// relayVerdict reads the topmost Authentication-Results header, the one
// the last relay added. Only it counts: headers further down were written
// by earlier hops or by the sender, who can claim any authserv-id. It
// vouches when its authserv-id is in trusted_relays and it reports
// dmarc=pass, and nothing but pass, for header.from = the From domain.
// how is "" when the mail has no Authentication-Results at all.
func (r *Receiver) relayVerdict(headers []string, domain string) senderAuth {
	if len(headers) == 0 {
		return senderAuth{}
	}
	id, results, err := authres.Parse(headers[0])
	id = strings.ToLower(strings.TrimSpace(id))
	by := limit(clean(id), maxAuthDetail)
	if !r.trusted[id] {
		return senderAuth{how: authRelayUntrusted, by: by}
	}
	if err != nil {
		return senderAuth{how: authRelayFail, by: by, detail: limit("unreadable: "+err.Error(), maxAuthDetail)}
	}
	pass := false
	for _, res := range results {
		d, ok := res.(*authres.DMARCResult)
		if !ok || headerFromDomain(d.From) != domain {
			continue
		}
		if d.Value != authres.ResultPass {
			return senderAuth{how: authRelayFail, by: by, detail: limit("dmarc="+clean(string(d.Value)), maxAuthDetail)}
		}
		pass = true
	}
	if !pass {
		return senderAuth{how: authRelayFail, by: by, detail: "no dmarc=pass for header.from=" + domain}
	}
	return senderAuth{ok: true, how: authRelay, by: by}
}

// headerFromDomain is the domain of an Authentication-Results header.from
// property: a domain (RFC 7489 §11.2), or an address some relays write.
func headerFromDomain(v string) string {
	v = strings.ToLower(strings.TrimSpace(v))
	return strings.TrimSuffix(v[strings.LastIndexByte(v, '@')+1:], ".")
}

// verifyDKIM checks the mail's DKIM signatures, at most maxSignatures of
// them, and says whether one by the From domain (aligned) verified.
func (r *Receiver) verifyDKIM(ctx context.Context, raw []byte, domain string) senderAuth {
	ctx, cancel := context.WithTimeout(ctx, dkimTimeout)
	defer cancel()
	verifs, err := dkim.VerifyWithOptions(bytes.NewReader(raw), &dkim.VerifyOptions{
		LookupTXT:        func(name string) ([]string, error) { return r.lookupTXT(ctx, name) },
		MaxVerifications: maxSignatures,
	})
	if err != nil && !errors.Is(err, dkim.ErrTooManySignatures) {
		// The mail could not be read as DKIM reads it; then no verification
		// can be relied on (go-msgauth clears the failing one's error).
		return senderAuth{how: authDKIMFail, detail: limit(err.Error(), maxAuthDetail)}
	}
	res := senderAuth{how: authNoSignature}
	for _, v := range verifs {
		d := strings.ToLower(strings.TrimSuffix(strings.TrimSpace(v.Domain), "."))
		if !aligned(domain, d) {
			if res.how == authNoSignature {
				res = senderAuth{how: authNotAligned, by: limit(clean(d), maxAuthDetail)}
			}
			continue
		}
		switch {
		case v.Err == nil:
			return senderAuth{ok: true, how: authDKIM, by: d}
		case dkim.IsTempFail(v.Err):
			res = senderAuth{how: authDKIMTempFail, by: d, detail: limit(v.Err.Error(), maxAuthDetail), retry: true}
		case !res.retry:
			res = senderAuth{how: authDKIMFail, by: d, detail: limit(v.Err.Error(), maxAuthDetail)}
		}
	}
	return res
}

// aligned reports whether a signature by domain d speaks for mail from
// domain from: the same domain, or from a subdomain of d. That is DMARC's
// relaxed alignment with "organizational domain" simplified: whoever can
// publish a key under d controls its subdomains too, so the suffix rule
// never lets a domain speak for one it does not control. A d= without a
// dot (a top-level domain) never counts.
func aligned(from, d string) bool {
	if d == "" || !strings.Contains(d, ".") {
		return false
	}
	return from == d || strings.HasSuffix(from, "."+d)
}
