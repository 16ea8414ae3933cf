package channel_test

import (
	"os"
	"slices"
	"testing"

	"github.com/heraldhq/herald/pkg/channel"
)

// TestEveryFolderIsInTheTable: each leaf package pkg/channel/<type> is one
// line of the table, under its folder's name, and the table names no type
// twice; a channel's folder without its line (or a line naming another
// type) is a channel no binary knows.
func TestEveryFolderIsInTheTable(t *testing.T) {
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var folders []string
	for _, e := range entries {
		if e.IsDir() && e.Name() != "spec" {
			folders = append(folders, e.Name())
		}
	}
	var types []string
	for _, c := range channel.Builtin {
		if slices.Contains(types, c.Type) {
			t.Errorf("the table has channel type %s twice", c.Type)
		}
		types = append(types, c.Type)
		if got, ok := channel.Of(c.Type); !ok || got.Type != c.Type {
			t.Errorf("Of(%q) = %v, %v", c.Type, got.Type, ok)
		}
	}
	for _, f := range folders {
		if !slices.Contains(types, f) {
			t.Errorf("pkg/channel/%s has no line in the table (channels.go), or its Spec's Type is not %q", f, f)
		}
	}
	for _, typ := range types {
		if !slices.Contains(folders, typ) {
			t.Errorf("the table's channel type %s has no folder pkg/channel/%s", typ, typ)
		}
	}
	if _, ok := channel.Of("fax"); ok {
		t.Error("Of knows a type the table has not")
	}
}

// TestSpecs: each line's settings are a fresh value on every call (an
// integration's are its own), and a channel with no keys has none.
func TestSpecs(t *testing.T) {
	for _, c := range channel.Builtin {
		if c.Settings == nil {
			continue
		}
		if a, b := c.Settings(), c.Settings(); a == nil || a == b {
			t.Errorf("%s: Settings() returned %p and %p, want two new values", c.Type, a, b)
		}
	}
	if c, _ := channel.Of("log"); c.Settings != nil || c.MaxFile == 0 {
		t.Errorf("log: settings %v, MaxFile %d; it has no keys and takes any file", c.Settings != nil, c.MaxFile)
	}
}
