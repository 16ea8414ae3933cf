package slack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/heraldhq/herald/services/messenger/deliver"
)

// answer is the part of a Web API answer Herald reads.
type answer struct {
	OK      bool   `json:"ok"`
	Error   string `json:"error"`
	Warning string `json:"warning"`
	Channel string `json:"channel"`
	TS      string `json:"ts"`
	// UploadURL and FileID are files.getUploadURLExternal's, Files
	// files.completeUploadExternal's, File files.info's.
	UploadURL string `json:"upload_url"`
	FileID    string `json:"file_id"`
	Files     []struct {
		ID string `json:"id"`
	} `json:"files"`
	File *fileInfo `json:"file"`
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
	// retryAfter is the answer's Retry-After.
	retryAfter time.Duration
	// cause is the failed exchange when no whole answer came (a
	// *deliver.CallError), or a short description of an answer that was
	// not Slack's.
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

// rateLimited reports whether Slack asked to wait, and how long
// (deliver.RateLimits.Limited).
func rateLimited(err error) (time.Duration, bool) {
	e, ok := errors.AsType[*apiError](err)
	if ok && (e.status == http.StatusTooManyRequests || e.code == "ratelimited" || e.code == "rate_limited") {
		return max(e.retryAfter, time.Second), true
	}
	return 0, false
}

// call posts params to the Web API method (encode), with the token in the
// Authorization header (Slack takes a JSON body only that way), and returns
// the answer of a call Slack accepted ("ok": true) or an *apiError.
func (s *sender) call(ctx context.Context, method string, params any) (*answer, error) {
	body, contentType, err := encode(params)
	if err != nil {
		return nil, &apiError{method: method, cause: err}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.apiURL+method, bytes.NewReader(body))
	if err != nil {
		return nil, &apiError{method: method, cause: errors.New(s.secrets.Scrub(err.Error()))}
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Authorization", "Bearer "+s.token)
	got, err := s.caller.Do(req)
	e := &apiError{method: method}
	if err != nil {
		failed, _ := errors.AsType[*deliver.CallError](err) // the Caller's every error
		if failed.Answer == nil {
			// No whole answer: a redirect, the network, an answer cut short.
			e.status, e.cause, e.unknown = failed.Status, failed, failed.Unknown
			return nil, e
		}
		// Slack says why in its JSON, whatever the status.
		got, e.retryAfter = failed.Answer, failed.RetryAfter
	}
	e.status = got.Status
	var a answer
	if err := json.Unmarshal(got.Body, &a); err != nil {
		if got.Status != http.StatusOK {
			return nil, e
		}
		e.cause = fmt.Errorf("the answer is not Web API JSON (%.80q)", s.secrets.Scrub(string(got.Body)))
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
	if a.OK && got.Status == http.StatusOK {
		return &a, nil
	}
	e.code, e.answer = a.Error, &a
	if e.code == "" && a.OK {
		e.cause = fmt.Errorf("HTTP %d with an ok answer", got.Status)
	}
	return nil, e
}

// encode is a call's body: url.Values as a form, for the methods that read
// their arguments from one (files.getUploadURLExternal, files.info),
// anything else as JSON.
func encode(params any) ([]byte, string, error) {
	if form, ok := params.(url.Values); ok {
		return []byte(form.Encode()), "application/x-www-form-urlencoded", nil
	}
	body, err := json.Marshal(params)
	return body, "application/json; charset=utf-8", err
}
