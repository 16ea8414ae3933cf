// Package discord is Herald's Discord channel, both ways: it sends,
// replies, reacts and edits as a bot through Discord's REST API, and takes
// messages, button presses and reactions from the gateway.
//
//   - sender.go: New, Deliver, Edit; api.go the REST client on deliver's
//     HTTP helper; errors.go each Discord error as a class and a fix.
//   - markdown.go, buttons.go, files.go: chunks, buttons, files and Fetch.
//   - receiver.go: NewReceiver, the gateway session; gateway.go its websocket.
//   - ingress.go, kinds.go: events as ingress.v1; which channels are threads.
//
// It uses no Discord library, so that every outcome has a name; discordtest
// fakes REST and gateway. docs/channels.md#discord has how it works.
package discord
