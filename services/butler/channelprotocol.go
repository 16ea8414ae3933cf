package butler

import (
	"github.com/mark3labs/mcp-go/server"
)

// MCP names of nexo-rs's channel contract (architecture.md §11), which a
// butler speaks beside Claude Code's: the same messages and permission relay
// under the nexo/ prefix.
const (
	CapabilityNexoChannel           = "nexo/channel"
	CapabilityNexoChannelPermission = "nexo/channel/permission"
	MethodNexoChannel               = "notifications/nexo/channel"
	MethodNexoPermissionRequest     = "notifications/nexo/channel/permission_request"
	MethodNexoPermission            = "notifications/nexo/channel/permission"
)

// nexoPermissionSchema is the version of nexo-rs's permission request a
// butler reads (its params' "schema"); a request of another version is
// refused, as nexo-rs asks of a channel server.
const nexoPermissionSchema = 1

// protocol is one channel protocol: the names a client reads channel messages
// and permission verdicts under.
type protocol struct {
	name                               string // "claude", "nexo"
	channel, permission                string // capability keys
	message, permissionRequest, answer string // notification methods
}

var (
	claudeProtocol = &protocol{name: "claude", channel: CapabilityChannel, permission: CapabilityChannelPermission,
		message: MethodChannel, permissionRequest: MethodPermissionRequest, answer: MethodPermission}
	nexoProtocol = &protocol{name: "nexo", channel: CapabilityNexoChannel, permission: CapabilityNexoChannelPermission,
		message: MethodNexoChannel, permissionRequest: MethodNexoPermissionRequest, answer: MethodNexoPermission}
	// protocols are the protocols a butler speaks, Claude Code's first.
	protocols = []*protocol{claudeProtocol, nexoProtocol}
)

// experimental is the capabilities a butler declares: both protocols'.
func experimental() map[string]any {
	out := map[string]any{}
	for _, f := range protocols {
		out[f.channel] = map[string]any{}
		out[f.permission] = map[string]any{}
	}
	return out
}

// claudeCodeClient is the clientInfo.name Claude Code initializes with.
const claudeCodeClient = "claude-code"

// protocolsOf are the protocols session s is pushed messages in. A client
// says which it reads by what it does: a permission request of one protocol
// (spoke, the latest) decides; else a capability of one protocol declared at
// initialize, or Claude Code's name; else it is pushed both, since each
// client ignores a notification it does not know (nexo-rs identifies itself
// only as "agent", and would otherwise never see a message).
func protocolsOf(s server.ClientSession, spoke *protocol) []*protocol {
	if spoke != nil {
		return []*protocol{spoke}
	}
	ci, ok := s.(server.SessionWithClientInfo)
	if !ok {
		return protocols
	}
	declared := ci.GetClientCapabilities().Experimental
	var out []*protocol
	for _, f := range protocols {
		if _, ok := declared[f.channel]; ok {
			out = append(out, f)
		}
	}
	switch {
	case len(out) > 0:
		return out
	case ci.GetClientInfo().Name == claudeCodeClient:
		return []*protocol{claudeProtocol}
	}
	return protocols
}

// identifier reports whether k matches ^[A-Za-z_][A-Za-z0-9_]*$.
func identifier(k string) bool {
	if k == "" {
		return false
	}
	for i, r := range k {
		switch {
		case r == '_', r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
