package config

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// CheckAddress reports what is wrong with a listen address (mcp_http,
// http_listen, an inbound listen): it must be host:port, the host may be
// empty (every interface), the port a number up to 65535 (0: any free
// port); "" if nothing is.
func CheckAddress(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Sprintf("%q is not host:port, like 127.0.0.1:8790 or :8790", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Sprintf("%q has no port number (0 to 65535)", addr)
	}
	if strings.ContainsAny(host, " /") {
		return fmt.Sprintf("%q has no valid host", addr)
	}
	return ""
}
