package testkit

import (
	"net"
	"testing"
)

// FreeAddr is a local address, "127.0.0.1:port", that was free a moment
// ago: for a server the test starts that must be given its address up
// front.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
