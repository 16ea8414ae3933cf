package obs

import (
	"fmt"
	"net"
	"net/http"
	"strings"
)

// NormalHost is a Host header's (or a configured name's) host: no port, no
// brackets, lower case, no trailing dot.
func NormalHost(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
}

// LoopbackHost reports whether a normal host names this machine only:
// localhost (and *.localhost) or a loopback address.
func LoopbackHost(host string) bool {
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// OperatorHost reports whether a request for Host host may read the
// operator's endpoints (/healthz, /readyz, /metrics) of a server bound to
// bound. A web page can make a browser on the operator's machine call any
// address under a name of the page's own domain (DNS rebinding); so a name
// with a dot is refused unless the server is bound to it. Loopback names, IP
// addresses, and one-label names, such as the service names compose and
// Prometheus use inside a fleet, are taken.
func OperatorHost(bound, host string) bool {
	host = NormalHost(host)
	switch {
	case host == "":
		return false
	case LoopbackHost(host), net.ParseIP(host) != nil, !strings.Contains(host, "."):
		return true
	}
	b, _, err := net.SplitHostPort(bound)
	return err == nil && NormalHost(b) == host
}

// operatorOnly answers 421 to a request whose Host OperatorHost refuses.
func operatorOnly(bound string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !OperatorHost(bound, r.Host) {
			http.Error(w, fmt.Sprintf("this endpoint does not answer for %q: use this machine's address, localhost, or a name without a dot", r.Host), http.StatusMisdirectedRequest)
			return
		}
		next.ServeHTTP(w, r)
	})
}
