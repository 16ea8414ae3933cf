package web

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sync"
)

// Bounds on the event streams of one integration in one process. Each open
// stream costs a connection, a goroutine and a buffer here, nothing on the bus.
const (
	// maxStreamsPerVisitor: a browser speaks HTTP/1.1 to the page and opens
	// at most six connections to it; four streams (four tabs) leave it two
	// for sending messages and loading the page.
	maxStreamsPerVisitor = 4
	// maxStreamsPerAddress bounds what one client address holds, whatever
	// cookies it makes up (a cookie is only a random secret, so anyone can
	// mint visitors): several people's browsers behind one NAT or proxy
	// still fit.
	maxStreamsPerAddress = 32
	// retryAfter is the Retry-After of a stream refused for too many: long
	// enough for a closed tab's stream to have ended.
	retryAfter = 10 // seconds
	// maxHistoryReads bounds the history reads in flight at once, and so the
	// short-lived consumers they make; more streams opening wait their turn.
	maxHistoryReads = 8
)

// streamCounts counts the open event streams per visitor and per address.
type streamCounts struct {
	mu        sync.Mutex
	byVisitor map[string]int
	byAddress map[string]int
}

func newStreamCounts() *streamCounts {
	return &streamCounts{byVisitor: map[string]int{}, byAddress: map[string]int{}}
}

// open counts one more stream of visitor from address, or says why not;
// release uncounts it.
func (s *streamCounts) open(address, visitor string) (release func(), refused string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.byAddress[address] >= maxStreamsPerAddress:
		return nil, fmt.Sprintf("too many open chat streams from %s (at most %d); close some tabs of this chat", address, maxStreamsPerAddress)
	case s.byVisitor[visitor] >= maxStreamsPerVisitor:
		return nil, fmt.Sprintf("this browser already follows the chat in %d tabs, the most it may; close one", maxStreamsPerVisitor)
	}
	s.byAddress[address]++
	s.byVisitor[visitor]++
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			decrement(s.byAddress, address)
			decrement(s.byVisitor, visitor)
		})
	}, ""
}

func decrement(m map[string]int, k string) {
	if m[k] <= 1 {
		delete(m, k)
		return
	}
	m[k]--
}

// clientAddress is what a request's streams are counted against: the peer's
// IP address (the page trusts no forwarding header), and for IPv6 its /64,
// which one host usually holds whole.
func clientAddress(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	ip = ip.Unmap().WithZone("")
	if ip.Is6() {
		if p, err := ip.Prefix(64); err == nil {
			return p.String()
		}
	}
	return ip.String()
}
