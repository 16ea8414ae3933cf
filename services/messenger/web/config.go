package web

import (
	webspec "github.com/heraldhq/herald/pkg/channel/web"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

func init() {
	deliver.Register(deliver.Channel{Type: "web", New: New}) // the page is its own receiver
}

// Config is a web integration's own keys. pkg/channel/web declares them,
// with their defaults and checks, so that every binary reads herald.yaml
// without linking this package.
type Config = webspec.Settings
