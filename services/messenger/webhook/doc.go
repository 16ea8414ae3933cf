// Package webhook is Herald's webhook channel, both ways (architecture.md §9): it
// delivers notify.v1 as signed HTTP POSTs to named URLs (New), and takes
// signed POSTs at /hooks/<integration id> as inbound messages for the bound
// butler (NewReceiver) — how a CI failure or a monitoring alert reaches a
// butler's session. Signatures follow Standard Webhooks
// (https://www.standardwebhooks.com): the headers webhook-id,
// webhook-timestamp (unix seconds) and webhook-signature ("v1,<base64 of
// HMAC-SHA256 of '<id>.<timestamp>.<body>'>", space-separated, one per key),
// with the integration's secret_env holding "whsec_" + base64 of the key.
// One secret signs what goes out and verifies what comes in; secret_env may
// hold several secrets separated by spaces during a rotation (each signs,
// any verifies).
//
//	integrations:
//	  - id: ci
//	    type: webhook
//	    secret_env: HERALD_CI_WEBHOOK_SECRET   # whsec_...
//	    recipients: { ops: "https://hooks.example.com/herald", pager: "https://pager.example.com/in" }
//	    default_recipient: ops
//	    grants: [health]
//	    inbound: { allow_from: ["*"] }          # POST /hooks/ci on http_listen
//
// # Outbound
//
// A notify's recipient names one of recipients (not a URL); omitted, a send
// goes to default_recipient (or the only recipient, if there is one), and a
// reply or reaction goes to the recipient named like the inbound message's
// sender if there is one (a CI system posting as "ci" gets its answers at
// recipients.ci), else to the default. An unknown name is a
// validation_error listing the configured names. The POST's body is one
// JSON object (fields without a value are left out):
//
//	{
//	  "type": "notify.send",               // notify.<intent>
//	  "delivery_id": "dlv_3f9a…",          // also the webhook-id header
//	  "intent": "send",                    // send | reply | react
//	  "butler": "health",                  // origin_butler
//	  "recipient": "ops",                  // the recipient's name
//	  "message": "Dose **taken**",         // markdown, as the butler wrote it
//	  "subject": "…", "emoji": "👍",
//	  "urgency": "normal",                 // low | normal | high
//	  "topic": "…", "level": "info",
//	  "thread": "…",                       // request_context.source_thread_identity
//	  "sender": "…"                        // request_context.source_sender_identity
//	}
//
// A notify with files is one multipart/form-data POST instead: first the
// part "payload" (Content-Type application/json), the JSON above with a
// "files" list, then each file as the part that list names, with its
// filename and Content-Type:
//
//	"files": [{"name": "build.log", "size": 6000, "media_type": "text/plain; charset=utf-8",
//	           "sha256": "c018c3…", "part": "files[0]"}, …]
//
//	--herald-<hash>
//	Content-Disposition: form-data; name="payload"
//	Content-Type: application/json
//
//	{"type":"notify.send",…,"files":[…]}
//	--herald-<hash>
//	Content-Disposition: form-data; name="files[0]"; filename="build.log"
//	Content-Type: text/plain; charset=utf-8
//
//	<the file's bytes>
//	--herald-<hash>--
//
// The signature is the same, over the raw body as received, boundaries and
// all: verify it before parsing anything, then check each part's size and
// sha256 against the list. Files are up to 50 MB each (10 per notify); a
// 413 is a validation_error saying how big the webhook was. The boundary
// is a hash of the payload, so a resend is byte for byte the same body
// here too. The body is written to a temp file (0600, removed once sent)
// while it is signed, since the signature header goes before it; a POST
// with files may take up to 10 minutes.
//
// Webhooks have no reactions of their own: a react is sent as an event like
// the others, with intent "react", the emoji and the thread it answers, and
// the receiver decides what it means. Every attempt of one delivery carries
// the same webhook-id and byte-for-byte the same body, so a receiver can
// deduplicate on webhook-id (or compare bodies); only webhook-timestamp and
// the signature change between attempts. That is why the body has no time
// of its own: the attempt's time is webhook-timestamp, which is signed.
//
// A 2xx answer delivers. Redirects are not followed (a 3xx is not_found:
// put the final URL in recipients). 401/403 are forbidden, 404/410
// not_found, other 4xx validation_error; 429 and 503 with Retry-After are
// overload_rejected after that wait, and 408, 425, 429, 5xx and a receiver
// that cannot be reached (refused, DNS, TLS) are target_unavailable, so the
// messenger retries them. A webhook that went out and got no answer (the
// 30-second request timeout, a connection reset) may be at the receiver:
// it is a timeout, which the messenger treats as uncertain, audited and
// reported, and resends (with the same webhook-id, so a receiver that
// deduplicates shows it once) or skips as on_uncertain says. Errors name
// the recipient and its URL as scheme://host only: webhook URLs often carry
// a token in their path or query (and user:password before the host), and
// errors reach butlers and the audit log. The secret is in no error and no
// log line.
//
// # Inbound
//
// With an inbound block, POST /hooks/<integration id> on http_listen takes
// a JSON object with a "text" string (required, not blank):
//
//	{"text": "Build 812 failed on main", "sender": "github-actions",
//	 "thread": "pr-1234", "chat": "alerts", "repo": "herald", "run_url": "https://…"}
//
// "sender" (or "source") names who sent it (else "webhook:<integration
// id>"; whoever holds the secret may claim any name); "thread" is the conversation it belongs to (meta thread_id, so
// each thread gets its own session) and is what a reply to it carries back;
// "chat" (or "channel") is the chat_id that bindings match (else the
// integration id). Every other string field goes to meta, its key made of
// letters, digits and _ (other characters become _), at most 32 fields of
// 4096 bytes each; other JSON types are ignored, and the keys Herald sets
// itself (chat_id, user_id, message_id, ts, kind, thread…) cannot be set
// this way. Meta also has user_id (the sender), message_id (webhook-id), ts
// (webhook-timestamp, unix seconds) and webhook_auth (signature or bearer).
// The message's source_thread_identity is the thread, or the webhook-id if
// the body names none, so that a reply or a reaction can name it.
//
// The request is authenticated by the Standard Webhooks headers, or, for a
// sender that cannot sign (a curl in a CI script), by "Authorization:
// Bearer <the whole secret>", compared in constant time; a bearer request
// may still send webhook-id for deduplication. It is answered 200
// {"ok":true,"request_id":"…"} only once the message is stored on the bus.
// The same webhook-id again (a retry, or a captured signed request
// replayed) is stored once: answered 200 with the first request_id and
// "duplicate":true, and routed nowhere, for 48 hours (bus.SeenTTL) across
// restarts of any messenger and of NATS (the bucket herald_seen), far longer
// than a signature stays valid (5 minutes). Refusals are JSON
// {"ok":false,"error":"…"}: 400 for a body that is not a JSON object with a
// text, 401 for a missing or wrong signature or token, or a timestamp more
// than 5 minutes away (a replay), 409 for a webhook-id already seen with a
// different body, 413 for a body over 1 MiB, and 503 (with Retry-After)
// while the messenger is starting or stopping or the bus cannot store the
// message. Refused signatures, timestamps and ids are audited as dropped
// (unsigned, bad_signature, bad_token, stale_timestamp, replayed_id).
//
// Who may then reach a butler is the switchboard's decision like on every
// channel: the sender must be in inbound.allow_from ("*" for anyone holding
// the secret) or approvers.
package webhook
