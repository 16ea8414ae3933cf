package channels_test

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/schemas"
	_ "github.com/heraldhq/herald/services/messenger/channels"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

var update = flag.Bool("update", false, "write the channel lists of schemas/ from the built-in channels (make schemas)")

// schemaDir is the schemas module's folder, from this package's.
const schemaDir = "../../../schemas"

// TestEveryChannelIsBuilt: every channel type configuration knows
// (pkg/channel's table) has a sender registered in the messenger's build,
// and every registered sender a type configuration knows; otherwise an
// integration could be configured that no messenger can deliver through,
// or a sender built that no herald.yaml can name.
func TestEveryChannelIsBuilt(t *testing.T) {
	known := config.BuiltChannels()
	for _, typ := range known {
		if _, ok := deliver.Lookup(typ); !ok {
			t.Errorf("configuration knows channel type %s, but no package registers its sender: add its line to channels.go", typ)
		}
	}
	for _, c := range deliver.Channels() {
		if !slices.Contains(known, c.Type) {
			t.Errorf("channel type %s registers a sender, but configuration does not know it: add it to pkg/channel's table of built-in channels", c.Type)
		}
	}
}

// TestSchemasListTheRegisteredChannels: the channel types notify.v1 names
// are the channels built into Herald (pkg/channel's table), and
// request_context.v1's and route.v1's source_channel enums are those that
// receive, with mcp, api and cli. Adding a channel is its leaf package
// (pkg/channel), its folder and its line in channels.go; `make schemas` (this
// test with -update) then writes the lists, and this test fails until it
// has.
func TestSchemasListTheRegisteredChannels(t *testing.T) {
	var types, receivers []string
	for _, typ := range config.BuiltChannels() {
		types = append(types, typ)
		if c, _ := deliver.Lookup(typ); c.Receives() {
			receivers = append(receivers, typ)
		}
	}
	// The schemas' order is kept (it is the order error messages list the
	// types in); new types go at the end.
	types = inOrder(schemas.ChannelTypes, types)
	sources := append(inOrder(schemas.ChannelTypes, receivers), schemas.OtherSources...)

	channel := regexp.MustCompile(`("pattern": "\^\()([a-z0-9|]+)(\)\(:)`)
	source := regexp.MustCompile(`("source_channel": \{ "enum": \[)([^\]]*)(\])`)
	quoted := func(list []string) string { return `"` + strings.Join(list, `", "`) + `"` }
	for _, f := range []struct {
		name string
		re   *regexp.Regexp
		want string
	}{
		{schemas.Notify, channel, strings.Join(types, "|")},
		{schemas.RequestContext, source, quoted(sources)},
		{schemas.Route, source, quoted(sources)},
	} {
		path := filepath.Join(schemaDir, f.name)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		matches := f.re.FindAllSubmatch(b, -1)
		if len(matches) != 1 {
			t.Fatalf("%s: %d places match %s, want 1 (the list this test writes)", f.name, len(matches), f.re)
		}
		if have := string(matches[0][2]); have != f.want {
			if *update {
				b = f.re.ReplaceAll(b, []byte("${1}"+strings.ReplaceAll(f.want, "$", "$$")+"${3}"))
				if err := os.WriteFile(path, b, 0o644); err != nil {
					t.Fatal(err)
				}
				t.Logf("%s: wrote %s", f.name, f.want)
				continue
			}
			t.Errorf("%s lists %s, the built-in channels %s: run `make schemas`", f.name, have, f.want)
		}
	}
}

// inOrder is list in the order of order, then what order lacks, sorted.
func inOrder(order, list []string) []string {
	var out, rest []string
	for _, x := range order {
		if slices.Contains(list, x) {
			out = append(out, x)
		}
	}
	for _, x := range list {
		if !slices.Contains(order, x) {
			rest = append(rest, x)
		}
	}
	slices.Sort(rest)
	return append(out, rest...)
}
