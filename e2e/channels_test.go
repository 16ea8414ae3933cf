package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// TestNotifyToolListsYourChannels: the notify tool tells each butler the
// integrations granted to it, its default first, not every type Herald knows.
func TestNotifyToolListsYourChannels(t *testing.T) {
	f := newFleet(t)
	for _, tt := range []struct {
		butler   string
		has, not []string
	}{
		{"health", []string{"telegram:tg_main (default)", "email:mail", "web:web", "log:audit_log", "telegram:tg_broken"}, []string{"slack", "webhook"}},
		{"finance", []string{"email:mail (default)", "telegram:tg_main", "log:audit_log"}, []string{"tg_broken", "slack", "webhook"}},
	} {
		tools, err := f.mcp(tt.butler, "").ListTools(t.Context(), mcp.ListToolsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		var desc string
		for _, tool := range tools.Tools {
			if tool.Name == "notify" {
				p, _ := json.Marshal(tool)
				desc = string(p)
			}
		}
		for _, s := range tt.has {
			if !strings.Contains(desc, s) {
				t.Errorf("%s's notify tool does not name %q: %s", tt.butler, s, desc)
			}
		}
		for _, s := range tt.not {
			if strings.Contains(desc, s) {
				t.Errorf("%s's notify tool names %q, which it may not use: %s", tt.butler, s, desc)
			}
		}
	}
}
