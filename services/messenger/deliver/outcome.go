package deliver

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http/httptrace"
	"net/textproto"
	"sync/atomic"
	"syscall"
)

// OutcomeUnknown reports whether a provider call that failed with err may
// still have been carried out: the request had gone out whole (written) and
// no complete answer came back. Senders class such failures as
// envelope.ErrTimeout, so the messenger treats the call as uncertain instead
// of sending it again as if it were fresh. Which errors count, and why:
// docs/channels.md#uncertain-calls.
func OutcomeUnknown(err error, written bool) bool {
	if err == nil || !written {
		return false
	}
	if _, moved := errors.AsType[*RedirectError](err); moved {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return true
	}
	if _, ok := errors.AsType[net.Error](err); ok {
		return true
	}
	if _, ok := errors.AsType[textproto.ProtocolError](err); ok {
		return true
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// TraceWrites returns ctx with an httptrace.ClientTrace that notes whether
// the HTTP request made with it was written whole, and a function that says
// so, for OutcomeUnknown. Each connection net/http tries starts the note
// afresh: it sends a request again itself only when the first try cannot
// have been taken (nothing of it was written, or the server refused the
// stream).
func TraceWrites(ctx context.Context) (context.Context, func() bool) {
	var written atomic.Bool
	trace := &httptrace.ClientTrace{
		GetConn:      func(string) { written.Store(false) },
		GotConn:      func(httptrace.GotConnInfo) { written.Store(false) },
		WroteRequest: func(i httptrace.WroteRequestInfo) { written.Store(i.Err == nil) },
	}
	return httptrace.WithClientTrace(ctx, trace), written.Load
}
