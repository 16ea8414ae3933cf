package web

import (
	"fmt"
	"net/http"
	"testing"
)

func TestClientAddress(t *testing.T) {
	tests := []struct {
		name, remote, want string
	}{
		{"IPv4", "192.0.2.7:51234", "192.0.2.7"},
		{"loopback", "127.0.0.1:80", "127.0.0.1"},
		{"IPv4 mapped into IPv6", "[::ffff:192.0.2.7]:51234", "192.0.2.7"},
		{"IPv6 counts by its /64", "[2001:db8:1:2:aaaa:bbbb:cccc:dddd]:443", "2001:db8:1:2::/64"},
		{"another host of the same /64", "[2001:db8:1:2::1]:443", "2001:db8:1:2::/64"},
		{"IPv6 with a zone", "[fe80::1%eth0]:443", "fe80::/64"},
		{"no port", "192.0.2.7", "192.0.2.7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := clientAddress(&http.Request{RemoteAddr: tt.remote}); got != tt.want {
				t.Fatalf("clientAddress(%q) = %q, want %q", tt.remote, got, tt.want)
			}
		})
	}
}

// TestStreamCounts: each limit holds on its own, and a release (even twice)
// frees exactly one place.
func TestStreamCounts(t *testing.T) {
	s := newStreamCounts()
	var releases []func()
	for range maxStreamsPerVisitor {
		release, refused := s.open("192.0.2.1", "alice")
		if refused != "" {
			t.Fatalf("refused within the limit: %s", refused)
		}
		releases = append(releases, release)
	}
	if _, refused := s.open("192.0.2.2", "alice"); refused == "" {
		t.Fatal("a visitor got more streams than the limit by changing address")
	}
	releases[0]()
	releases[0]()
	if _, refused := s.open("192.0.2.2", "alice"); refused != "" {
		t.Fatalf("a released place is not free: %s", refused)
	}
	if _, refused := s.open("192.0.2.2", "alice"); refused == "" {
		t.Fatal("a release twice freed two places")
	}

	for i := range maxStreamsPerAddress {
		if _, refused := s.open("192.0.2.9", fmt.Sprint("visitor-", i)); refused != "" {
			t.Fatalf("stream %d from one address refused: %s", i+1, refused)
		}
	}
	if _, refused := s.open("192.0.2.9", "someone-new"); refused == "" {
		t.Fatal("an address got more streams than the limit with a new visitor each")
	}
}
