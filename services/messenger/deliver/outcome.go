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
// no complete answer came back. The provider may have acted on it or not,
// and nothing it sent says which. Every sender uses it to decide which of
// its failures are of class envelope.ErrTimeout; the messenger keeps such a
// call marked in flight, so the next attempt treats it as uncertain
// (audited, reported, resent or skipped per on_uncertain) instead of
// sending it again as if it were fresh.
//
// Unknown, once written:
//   - the call's context ended (deadline or cancel);
//   - any net.Error: the client's own timeout (http.Client.Timeout, while
//     awaiting headers or reading the body), a connection deadline, a reset,
//     a broken pipe, and every failed HTTP round trip (a *url.Error);
//   - the connection ending early (io.EOF, io.ErrUnexpectedEOF,
//     net.ErrClosed, ECONNRESET, EPIPE) or an answer that cannot be read
//     (textproto.ProtocolError).
//
// Known, and so never unknown: anything before the request was written (a
// refused connection, a failed DNS lookup or TLS handshake; there was
// nothing for the provider to act on), a *RedirectError (a complete answer
// pointing elsewhere), and any error that is not about the connection, such
// as the provider's own refusal or status. For HTTP, TraceWrites says
// whether the request was written (a Caller does both, and reports the
// verdict as CallError.Unknown); for SMTP it is whether the mail's final
// dot was sent.
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
