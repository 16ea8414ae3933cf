package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"net/smtp"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/messenger"
	"github.com/heraldhq/herald/services/messenger/deliver"
	"github.com/heraldhq/herald/services/messenger/email"
	"github.com/heraldhq/herald/services/messenger/email/dkimtest"
)

// mailRelay is the authserv-id the fleet's mail integration trusts in these
// tests.
const mailRelay = "mx.example.com"

// mailAuthFleet is the fleet with its mail integration trusting mailRelay
// (and dm_policy as given), its messenger fetching DKIM keys from dns, and
// the switchboard and messenger running. It returns the SMTP listener's
// address.
func mailAuthFleet(t *testing.T, dns *dkimtest.Resolver, dmPolicy string) (*fleet, string) {
	t.Helper()
	f := newFleet(t)
	it := mailIntegration(t, f.cfg)
	it.Settings.(*email.Config).Inbound.TrustedRelays = []string{mailRelay}
	if dmPolicy != "" {
		it.Inbound.DMPolicy = dmPolicy
	}
	f.start("switchboard")
	f.startMessenger(messenger.Options{Receivers: map[string]deliver.ReceiverFactory{"email": email.NewReceiverFactory(email.WithLookupTXT(dns.LookupTXT))}})
	return f, regexp.MustCompile(`\d+\.\d+\.\d+\.\d+:\d+`).FindString(f.statusDetail("mail"))
}

func mailIntegration(t *testing.T, cfg *config.Config) *config.Integration {
	t.Helper()
	for i := range cfg.Integrations {
		if cfg.Integrations[i].ID == "mail" {
			return &cfg.Integrations[i]
		}
	}
	t.Fatal("the fleet has no mail integration")
	return nil
}

// startMessenger runs the messenger as start("messenger") does, with o's
// factories (Receivers, Channels) overriding the built-in ones.
func (f *fleet) startMessenger(o messenger.Options) {
	f.t.Helper()
	o.Config, o.NC, o.Log, o.Getenv = f.cfg, f.nc, f.logger(), f.getenv
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- messenger.Run(ctx, o) }()
	f.mu.Lock()
	f.services["messenger"] = func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			f.t.Errorf("messenger: %v", err)
		}
	}
	f.mu.Unlock()
	f.waitConsumers("messenger")
}

// aliceMail is a mail From alice@example.com, who is in the mail
// integration's allow_from.
func aliceMail(messageID, body string) string {
	return "From: Alice <alice@example.com>\r\nTo: herald@example.com\r\nSubject: Invoice\r\nMessage-ID: " + messageID +
		"\r\nDate: Sun, 22 Nov 2026 10:00:00 +0000\r\n\r\n" + body + "\r\n"
}

// requestIDOf is the request_id the receiver stamped on the mail with
// messageID, from its log.
func (f *fleet) requestIDOf(messageID string) string {
	f.t.Helper()
	var id string
	testkit.Eventually(f.t, 10*time.Second, func() bool {
		recs := f.logs.Records(map[string]string{"msg": "inbound mail received", "message_id": messageID})
		if len(recs) == 0 {
			return false
		}
		id, _ = recs[0]["request_id"].(string)
		return id != ""
	}, "the receiver's log of "+messageID)
	return id
}

// outcome waits for the switchboard's audit record of requestID: "routed"
// or the reason it was refused.
func (f *fleet) outcome(requestID string) string {
	f.t.Helper()
	var got string
	testkit.Eventually(f.t, 15*time.Second, func() bool {
		for _, kind := range []string{"routed", "rejected", "dropped"} {
			for _, r := range f.audit(kind) {
				if r["request_id"] == requestID {
					got = kind
					if kind != "routed" {
						got, _ = r["reason"].(string)
					}
					return true
				}
			}
		}
		return false
	}, "the switchboard's audit record of "+requestID)
	return got
}

// inboxIngress returns what waits in butler's inbox (no butler runs), by
// native_id. The inbox is a work queue, which takes no second reader: the
// messages are read by sequence.
func (f *fleet) inboxIngress(butler string) map[string]*envelope.Ingress {
	f.t.Helper()
	ctx := f.t.Context()
	stream, err := f.js.Stream(ctx, bus.StreamInbox)
	if err != nil {
		f.t.Fatal(err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	out := map[string]*envelope.Ingress{}
	for seq := info.State.FirstSeq; seq > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := stream.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			f.t.Fatal(err)
		}
		if m.Subject != bus.InboxSubject(butler) {
			continue
		}
		var route struct {
			Input struct {
				Context struct {
					Ingress *envelope.Ingress `json:"ingress"`
				} `json:"context"`
			} `json:"input"`
		}
		if err := json.Unmarshal(m.Data, &route); err != nil || route.Input.Context.Ingress == nil {
			f.t.Fatalf("inbox message is not route.v1{ingress}: %s", m.Data)
		}
		out[route.Input.Context.Ingress.NativeID] = route.Input.Context.Ingress
	}
	return out
}

// TestMailSenderAuthentication: allow_from lets a mail in only when its
// From address is authenticated (an aligned DKIM signature, or dmarc=pass
// from a trusted relay); a forged From is refused as a stranger and
// audited, through the real listener, switchboard and NATS.
func TestMailSenderAuthentication(t *testing.T) {
	dns := dkimtest.NewResolver()
	key := dkimtest.NewKey(t, "example.com", "s2026")
	dns.Publish(t, key)
	f, addr := mailAuthFleet(t, dns, "")

	mails := []struct {
		name, messageID, msg string
		want                 string // "routed", or the switchboard's refusal
	}{
		{"signed by example.com", "<signed@mail.example.com>", key.Sign(t, aliceMail("<signed@mail.example.com>", "Signed.")), "routed"},
		{"forged: no signature", "<forged@mail.example.com>", aliceMail("<forged@mail.example.com>", "Pay the attacker."), "sender_not_allowed"},
		{"trusted relay: dmarc=pass", "<relayed@mail.example.com>",
			"Authentication-Results: " + mailRelay + "; dkim=pass header.d=example.com; dmarc=pass header.from=example.com\r\n" +
				aliceMail("<relayed@mail.example.com>", "Relayed."), "routed"},
		{"untrusted relay: dmarc=pass", "<fake-relay@mail.example.com>",
			"Authentication-Results: mx.attacker.example; dmarc=pass header.from=example.com\r\n" +
				aliceMail("<fake-relay@mail.example.com>", "Trust me."), "sender_not_allowed"},
		{"signed, then the body changed", "<tampered@mail.example.com>",
			strings.Replace(key.Sign(t, aliceMail("<tampered@mail.example.com>", "Pay invoice 42.")), "42", "43", 1), "sender_not_allowed"},
	}
	for _, m := range mails {
		if err := smtp.SendMail(addr, nil, "alice@example.com", []string{"herald@example.com"}, []byte(m.msg)); err != nil {
			t.Fatalf("%s: %v", m.name, err)
		}
	}
	for _, m := range mails {
		if got := f.outcome(f.requestIDOf(m.messageID)); got != m.want {
			t.Errorf("%s: %s, want %s", m.name, got, m.want)
		}
	}

	inbox := f.inboxIngress("finance")
	if len(inbox) != 2 {
		t.Errorf("%d mails reached finance's inbox, want the 2 authenticated ones", len(inbox))
	}
	for id, how := range map[string]string{"<signed@mail.example.com>": "dkim", "<relayed@mail.example.com>": "relay"} {
		in := inbox[id]
		if in == nil {
			t.Errorf("%s did not reach the inbox", id)
			continue
		}
		if in.RequestContext.SourceSenderIdentity != "alice@example.com" || in.Meta["sender_authenticated"] != "true" || in.Meta["sender_auth"] != how {
			t.Errorf("%s reached the butler from %q (sender_authenticated %q, sender_auth %q), want alice@example.com authenticated by %s",
				id, in.RequestContext.SourceSenderIdentity, in.Meta["sender_authenticated"], in.Meta["sender_auth"], how)
		}
	}
	if recs := f.logs.Records(map[string]string{"sender_auth": "no_signature", "message_id": "<forged@mail.example.com>"}); len(recs) != 1 {
		t.Errorf("the forged mail's reason is logged %d times, want once", len(recs))
	}
}

// TestForgedMailPairing: under dm_policy pairing a forged From is a
// stranger too; its pairing code goes to the address the mail claimed, so
// only whoever reads that mailbox can ever hand it to the operator, and
// nothing reaches a butler.
func TestForgedMailPairing(t *testing.T) {
	f, addr := mailAuthFleet(t, dkimtest.NewResolver(), "pairing")
	const id = "<forged-pairing@mail.example.com>"
	if err := smtp.SendMail(addr, nil, "attacker@evil.example", []string{"herald@example.com"}, []byte(aliceMail(id, "Let me in."))); err != nil {
		t.Fatal(err)
	}
	if got := f.outcome(f.requestIDOf(id)); got != "pairing_code_sent" {
		t.Fatalf("the forged mail got %s, want pairing_code_sent", got)
	}
	code := f.smtp.WaitMessages(t, 1, 10*time.Second)[0]
	body, _ := code.Part("text/plain")
	if len(code.To) != 1 || code.To[0] != "alice@example.com" || !strings.Contains(body.Body, "pair approve") {
		t.Errorf("pairing code mailed to %v (%q), want to alice@example.com, the claimed address, never the envelope sender", code.To, body.Body)
	}
	if n := len(f.inboxIngress("finance")); n != 0 {
		t.Errorf("%d mails reached a butler, want none", n)
	}
}
