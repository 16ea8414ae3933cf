// Package schemas holds the JSON Schemas (draft 2020-12) of every Herald
// envelope. Each file has an absolute $id; cross-file $refs resolve by it.
package schemas

import "embed"

// FS holds every *.json schema of this folder.
//
//go:embed *.json
var FS embed.FS

// BaseURI is the $id prefix every schema shares.
const BaseURI = "https://schemas.herald.dev/"

// Names of the schema files, one per envelope.
const (
	RequestContext = "request_context.v1.json"
	Notify         = "notify.v1.json"
	NotifyResponse = "notify_response.v1.json"
	Route          = "route.v1.json"
	RouteResponse  = "route_response.v1.json"
	Ingress        = "ingress.v1.json"
)
