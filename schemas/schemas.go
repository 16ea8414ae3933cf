// Package schemas holds the JSON Schemas (draft 2020-12) of every Herald
// envelope. Each file has an absolute $id; cross-file $refs resolve by it.
package schemas

import (
	"embed"
	"encoding/json"
	"strings"
)

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

// ChannelTypes are the channel types a notify may name, as notify.v1's
// delivery.channel pattern lists them: the one list config, validation and
// the butler derive theirs from. The pattern, like the source_channel
// enums, is written from the channels the messenger registers (`make
// schemas`), and a test of services/messenger/channels fails when they
// differ.
var ChannelTypes = channelTypes()

// OtherSources are the sources of a request that are not channels: an MCP
// client, the HTTP API and the command line.
var OtherSources = []string{"mcp", "api", "cli"}

// SourceChannels are where an inbound message may come from, as
// request_context.v1's source_channel enum lists them: the channel types
// that receive, and mcp, api and cli.
var SourceChannels = sourceChannels()

func sourceChannels() []string {
	b, err := FS.ReadFile(RequestContext)
	if err != nil {
		panic("schemas: " + err.Error())
	}
	var doc struct {
		Properties struct {
			SourceChannel struct {
				Enum []string `json:"enum"`
			} `json:"source_channel"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(b, &doc); err != nil || len(doc.Properties.SourceChannel.Enum) == 0 {
		panic("schemas: " + RequestContext + ": no source_channel enum")
	}
	return doc.Properties.SourceChannel.Enum
}

func channelTypes() []string {
	b, err := FS.ReadFile(Notify)
	if err != nil {
		panic("schemas: " + err.Error())
	}
	var doc struct {
		Properties struct {
			Delivery struct {
				Properties struct {
					Channel struct {
						Pattern string `json:"pattern"`
					} `json:"channel"`
				} `json:"properties"`
			} `json:"delivery"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		panic("schemas: " + Notify + ": " + err.Error())
	}
	// "^(telegram|email|...)(:...)?$"
	p := doc.Properties.Delivery.Properties.Channel.Pattern
	start, end := strings.Index(p, "^("), strings.Index(p, ")")
	if start != 0 || end < 0 {
		panic("schemas: " + Notify + ": delivery.channel pattern " + p + " does not start with ^(type|type...)")
	}
	return strings.Split(p[2:end], "|")
}
