// Package webhook is Herald's webhook channel, both ways: New delivers
// notify.v1 as signed POSTs to named URLs, and NewReceiver takes signed
// POSTs at /hooks/<integration id> as messages for the bound butler, which
// is how a CI failure or a monitoring alert reaches a butler's session.
//
//   - sender.go, errors.go: Deliver, recipients, each answer as a class.
//   - files.go: the multipart body of a notify with files.
//   - signature.go: Standard Webhooks signing, verifying and bearer tokens.
//   - receiver.go, ingress.go, seen.go: the endpoint, the body as
//     ingress.v1, and the webhook-ids stored lately.
//
// docs/channels.md#webhooks has the wire format and every answer.
package webhook
