package approval

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A grant is an approver's "Allow for this session": the butler answers
// later permission requests of that MCP session for that tool itself,
// until the grant expires (approvals.grant_ttl) or is revoked (herald grants
// revoke). It never covers another session, butler or tool: its key is made
// of all three, and the butler looks up exactly the key of the request it
// has.
//
// Keys: "_grant.<butler>.<session>.<tool>", session and tool in unpadded
// base64url. No butler name starts with "_", so a butler's NATS user, which
// may read only "_grant.<its name>.>", reads its own grants and no other.

// Grant is one standing "Allow for this session".
type Grant struct {
	// ID names it to the operator (herald grants ls / revoke).
	ID        string `json:"id"`
	Butler    string `json:"butler"`
	Session   string `json:"session"`
	ToolName  string `json:"tool_name"`
	GrantedBy string `json:"granted_by"`
	Channel   string `json:"channel"`
	// Prompt is the permission request that was answered with it.
	Prompt    string    `json:"prompt"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
}

// GrantKey is the key of the grant of butler's session for tool.
func GrantKey(butler, session, tool string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return "_grant." + butler + "." + enc([]byte(session)) + "." + enc([]byte(tool))
}

// GrantID is the id the operator knows the grant of key by.
func GrantID(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "g_" + hex.EncodeToString(sum[:5])
}

// AddGrant records g (its ID is set from its key).
func (s *Store) AddGrant(ctx context.Context, g *Grant) error {
	key := GrantKey(g.Butler, g.Session, g.ToolName)
	g.ID = GrantID(key)
	b, err := json.Marshal(g)
	if err != nil {
		return err
	}
	_, err = s.kv.Put(ctx, key, b)
	return err
}

// GrantFor is butler's standing grant for tool in session, nil if there is
// none or it has expired.
func (s *Store) GrantFor(ctx context.Context, butler, session, tool string) (*Grant, error) {
	e, err := s.kv.Get(ctx, GrantKey(butler, session, tool))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var g Grant
	if err := json.Unmarshal(e.Value(), &g); err != nil {
		return nil, fmt.Errorf("grant of %s: %w", butler, err)
	}
	if g.Butler != butler || g.Session != session || g.ToolName != tool || !s.now().Before(g.ExpiresAt) {
		return nil, nil
	}
	return &g, nil
}

// Grants are the grants not yet expired, oldest first.
func (s *Store) Grants(ctx context.Context) ([]Grant, error) {
	all, err := listJSON[Grant](ctx, s, "_grant.>")
	if err != nil {
		return nil, err
	}
	var out []Grant
	for _, g := range all {
		if s.now().Before(g.ExpiresAt) {
			out = append(out, g)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out, nil
}

// ErrNoGrant: no standing grant has that id.
var ErrNoGrant = errors.New("no such grant")

// Revoke ends the grant id at once: the next request it would have covered
// goes to the approvers. It returns the grant it ended.
func (s *Store) Revoke(ctx context.Context, id string) (*Grant, error) {
	d, ok := s.kv.(interface {
		Delete(ctx context.Context, key string, opts ...jetstream.KVDeleteOpt) error
	})
	if !ok {
		return nil, errors.New("this binding of the approvals bucket cannot delete")
	}
	grants, err := s.Grants(ctx)
	if err != nil {
		return nil, err
	}
	id = strings.TrimSpace(id)
	for _, g := range grants {
		if g.ID == id {
			if err := d.Delete(ctx, GrantKey(g.Butler, g.Session, g.ToolName)); err != nil {
				return nil, err
			}
			return &g, nil
		}
	}
	return nil, fmt.Errorf("%w %q (herald grants ls lists them)", ErrNoGrant, id)
}
