package schemas_test

import (
	"slices"
	"testing"

	"github.com/heraldhq/herald/schemas"
)

// TestChannelTypes: the list every part derives its channel types from is
// the one notify.v1 spells out.
func TestChannelTypes(t *testing.T) {
	want := []string{"telegram", "email", "slack", "webhook", "web", "log"}
	if !slices.Equal(schemas.ChannelTypes, want) {
		t.Fatalf("ChannelTypes = %v, want %v", schemas.ChannelTypes, want)
	}
}
