package schemas_test

import (
	"regexp"
	"slices"
	"testing"

	"github.com/heraldhq/herald/schemas"
)

// TestChannelLists: the channel types notify.v1 names and the sources
// request_context.v1 names are read from the schemas, are well formed, and
// agree: every source but mcp, api and cli is a channel type. Which types
// they are is pkg/config's table's to say (services/messenger/channels checks it).
func TestChannelLists(t *testing.T) {
	name := regexp.MustCompile(`^[a-z][a-z0-9]*$`)
	for _, list := range [][]string{schemas.ChannelTypes, schemas.SourceChannels} {
		if len(list) == 0 {
			t.Fatal("an empty list")
		}
		for i, typ := range list {
			if !name.MatchString(typ) || slices.Contains(list[:i], typ) {
				t.Errorf("%q in %v: not a type name, or twice", typ, list)
			}
		}
	}
	for _, src := range schemas.SourceChannels {
		if !slices.Contains(schemas.ChannelTypes, src) && !slices.Contains(schemas.OtherSources, src) {
			t.Errorf("source_channel %q is neither a channel type nor one of %v", src, schemas.OtherSources)
		}
	}
	for _, src := range schemas.OtherSources {
		if !slices.Contains(schemas.SourceChannels, src) {
			t.Errorf("source_channel lacks %q", src)
		}
	}
}
