package butler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// ServedProtocolVersions are the MCP revisions a butler speaks, newest first:
// the session-oriented ones (initialize handshake, a GET stream on HTTP).
//
// MCP 2026-07-28 is left out on purpose, on HTTP and on stdio. It has no
// sessions and no unsolicited notifications, and Claude Code (2.1.332)
// delivers channel messages only on a connection that has them: when a butler
// offered 2026-07-28, Claude Code negotiated it and then skipped every
// notifications/claude/channel ("connection negotiated a modern protocol
// revision with no unsolicited notification path"), so the human's messages
// and the permission relay never reached the model. Lift this once Claude
// Code delivers channel notifications on 2026-07-28 connections (for
// instance over subscriptions/listen) and mcp-go pushes custom notifications
// there; docs/decisions.md says how to check.
var ServedProtocolVersions = []string{
	mcp.ProtocolVersion20251125,
	mcp.ProtocolVersion20250618,
	mcp.ProtocolVersion20250326,
	mcp.ProtocolVersion20241105,
}

// ErrProtocolVersion is a request of an MCP revision the butler does not
// serve.
var ErrProtocolVersion = errors.New("unsupported MCP protocol version")

// protocolVersionsContext tells server/discover, on a transport without an
// option of its own (stdio), which revisions to advertise.
func protocolVersionsContext(ctx context.Context) context.Context {
	return server.WithSupportedProtocolVersions(ctx, ServedProtocolVersions)
}

// refuseUnservedRevision is a request hook: a request that declares, in its
// _meta, a revision the butler does not serve (2026-07-28's way of speaking
// without a handshake) is refused with the revisions it does serve, so the
// client falls back to initialize instead of settling on a connection that
// would drop channel messages. The HTTP transport refuses such requests
// itself (with the same list); this covers stdio, whose transport only
// filters what it advertises.
func refuseUnservedRevision(_ context.Context, _ any, message any) error {
	raw, ok := message.(json.RawMessage)
	// Most requests name no revision: not decoding them again is 1% of a
	// notify's CPU at the ceiling (make bench's profiles).
	if !ok || !bytes.Contains(raw, []byte("protocolVersion")) {
		return nil
	}
	var req struct {
		Params struct {
			Meta map[string]any `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(raw, &req) != nil {
		return nil // the handler reports a malformed request better
	}
	version, _ := req.Params.Meta[mcp.MetaKeyProtocolVersion].(string)
	if !mcp.IsModernProtocol(version) || slices.Contains(ServedProtocolVersions, version) {
		return nil
	}
	return fmt.Errorf("%w %s: this butler serves %s; connect with initialize on one of them (2026-07-28 is left out because Claude Code delivers channel messages only on the older revisions)",
		ErrProtocolVersion, version, strings.Join(ServedProtocolVersions, ", "))
}
