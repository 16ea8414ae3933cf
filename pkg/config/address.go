package config

import "github.com/heraldhq/herald/pkg/channel/spec"

// CheckAddress reports what is wrong with a listen address (mcp_http,
// http_listen, an inbound listen): it must be host:port, the host may be
// empty (every interface), the port a number up to 65535 (0: any free
// port); "" if nothing is. It is spec.CheckAddress, which the channels'
// checks share.
func CheckAddress(addr string) string { return spec.CheckAddress(addr) }
