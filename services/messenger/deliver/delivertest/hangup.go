package delivertest

import (
	"net"
	"net/http"
)

// HangUp ends the HTTP exchange w answers without an answer: the
// connection is reset once the request has been read. That is what a client
// sees when the provider took its call and the answer was lost on the way
// (a proxy or the network failing in between). A fake's handler calls it in
// place of writing its answer, and returns.
func HangUp(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		// HTTP/2 cannot hand its connection over: abort the stream instead.
		panic(http.ErrAbortHandler)
	}
	Reset(conn)
}

// Reset closes conn with a TCP reset rather than an orderly close, so the
// peer's next read fails with "connection reset by peer"; the same for a
// TLS connection's underlying one.
func Reset(conn net.Conn) {
	raw := conn
	if tc, ok := conn.(interface{ NetConn() net.Conn }); ok {
		raw = tc.NetConn()
	}
	if tcp, ok := raw.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0)
	}
	_ = raw.Close()
}
