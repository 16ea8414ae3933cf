package channels_test

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/heraldhq/herald/schemas"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

var update = flag.Bool("update", false, "write the channel lists of schemas/ from the registry (make schemas)")

// schemaDir is the schemas module's folder, from this package's.
const schemaDir = "../../../schemas"

// TestSchemasListTheRegisteredChannels: the channel types notify.v1 names
// are the channels built into Herald, and request_context.v1's and
// route.v1's source_channel enums are those that receive, with mcp, api and
// cli. Adding a channel is its folder and its line in channels.go; `make
// schemas` (this test with -update) then writes the lists, and this test
// fails until it has.
func TestSchemasListTheRegisteredChannels(t *testing.T) {
	var types, receivers []string
	for _, c := range deliver.Channels() {
		types = append(types, c.Type)
		if c.Receives() {
			receivers = append(receivers, c.Type)
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
			t.Errorf("%s lists %s, the registry %s: run `make schemas`", f.name, have, f.want)
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
