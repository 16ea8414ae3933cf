package slack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/heraldhq/herald/services/messenger/deliver"
)

// maxAnswer bounds the answer of one Web API call read into memory.
const maxAnswer = 1 << 20

// answer is the part of a Web API answer Herald reads.
type answer struct {
	OK      bool   `json:"ok"`
	Error   string `json:"error"`
	Warning string `json:"warning"`
	Channel string `json:"channel"`
	TS      string `json:"ts"`
	// Needed and Provided name the scopes of a missing_scope error.
	Needed           string `json:"needed"`
	Provided         string `json:"provided"`
	ResponseMetadata struct {
		Messages []string `json:"messages"`
		Warnings []string `json:"warnings"`
	} `json:"response_metadata"`
}

// apiError is a Web API call that did not succeed: Slack's error code, an
// HTTP status that is not Slack's answer, or no answer at all. Its texts
// hold no token (the token travels only in a header).
type apiError struct {
	method string
	// status is the HTTP status; 0 when no answer came.
	status int
	// code is Slack's "error" ("channel_not_found"); "" when the answer was
	// not Web API JSON.
	code   string
	answer *answer
	// retryAfter is a 429's Retry-After.
	retryAfter time.Duration
	// cause is the transport failure when no answer came, or a short
	// description of an answer that was not Slack's.
	cause error
	// unknown: the call went out whole and no complete answer came
	// (deliver.OutcomeUnknown), so Slack may have carried it out.
	unknown bool
}

func (e *apiError) Error() string {
	switch {
	case e.code != "":
		return fmt.Sprintf("slack %s: %s", e.method, e.code)
	case e.cause != nil:
		return fmt.Sprintf("slack %s: %v", e.method, e.cause)
	}
	return fmt.Sprintf("slack %s: HTTP %d", e.method, e.status)
}

func (e *apiError) Unwrap() error { return e.cause }

// rateLimited reports whether Slack asked to wait, and how long.
func (e *apiError) rateLimited() (time.Duration, bool) {
	if e.status == http.StatusTooManyRequests || e.code == "ratelimited" || e.code == "rate_limited" {
		return max(e.retryAfter, time.Second), true
	}
	return 0, false
}

// call posts params as JSON to the Web API method, with the token in the
// Authorization header (Slack takes a JSON body only that way), and returns
// the answer of a call Slack accepted ("ok": true) or an *apiError.
func (s *sender) call(ctx context.Context, method string, params any) (*answer, error) {
	body, err := json.Marshal(params)
	if err != nil {
		return nil, &apiError{method: method, cause: err}
	}
	traced, written := deliver.TraceWrites(ctx)
	req, err := http.NewRequestWithContext(traced, http.MethodPost, s.apiURL+method, bytes.NewReader(body))
	if err != nil {
		return nil, &apiError{method: method, cause: errors.New(s.scrub(err.Error()))}
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := s.client.Do(req)
	if moved, ok := errors.AsType[*deliver.RedirectError](err); ok {
		return nil, &apiError{method: method, status: moved.Status, cause: &deliver.RedirectError{Status: moved.Status, Location: s.scrub(moved.Location)}}
	}
	if err != nil {
		return nil, &apiError{method: method, cause: errors.New(s.scrub(err.Error())), unknown: deliver.OutcomeUnknown(err, written())}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		// Slack's answer is its JSON: without all of it, whether the call
		// was carried out is not known.
		return nil, &apiError{method: method, status: resp.StatusCode, cause: fmt.Errorf("reading the answer: %s", s.scrub(err.Error())),
			unknown: deliver.OutcomeUnknown(err, true)}
	}
	e := &apiError{method: method, status: resp.StatusCode}
	if resp.StatusCode == http.StatusTooManyRequests {
		secs, _ := strconv.Atoi(strings.TrimSpace(resp.Header.Get("Retry-After")))
		e.retryAfter = time.Duration(max(secs, 1)) * time.Second
	}
	var a answer
	if err := json.Unmarshal(data, &a); err != nil {
		if resp.StatusCode != http.StatusOK {
			return nil, e
		}
		e.cause = fmt.Errorf("the answer is not Web API JSON (%.80q)", s.scrub(string(data)))
		return nil, e
	}
	if w := a.Warning; w != "" || len(a.ResponseMetadata.Warnings) > 0 {
		if w == "" {
			w = strings.Join(a.ResponseMetadata.Warnings, ",")
		}
		// Slack took the call but says something about it will stop
		// working; worth an operator's look, never a failure.
		s.log.Warn("slack warns about a call", "method", method, "warning", w)
	}
	if a.OK && resp.StatusCode == http.StatusOK {
		return &a, nil
	}
	e.code, e.answer = a.Error, &a
	if e.code == "" && a.OK {
		e.cause = fmt.Errorf("HTTP %d with an ok answer", resp.StatusCode)
	}
	return nil, e
}
