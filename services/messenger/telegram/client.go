package telegram

import (
	"bytes"
	"errors"
	"io"
	"net/http"

	"github.com/heraldhq/herald/services/messenger/deliver"
)

// botClient is the HTTP client go-telegram/bot calls, and the receiver's
// getUpdates: every Bot API call goes through a deliver.Caller, which
// bounds the answer, scrubs the token from every error (the library's
// include the request's URL, which holds it) and says whether a call
// that got no answer may have been carried out (deliver.CallError.Unknown,
// which the library's errors wrap).
type botClient struct{ deliver.Caller }

// Do hands the library the Bot API's whole answer to req, whatever its
// status, or the Caller's error when none came.
func (c botClient) Do(req *http.Request) (*http.Response, error) {
	ans, err := c.answer(req)
	if err != nil {
		return nil, err
	}
	return &http.Response{
		StatusCode:    ans.Status,
		Header:        ans.Header,
		Body:          io.NopCloser(bytes.NewReader(ans.Body)),
		ContentLength: int64(len(ans.Body)),
		Request:       req,
	}, nil
}

// answer makes one Bot API call. The Bot API says why it refused a call
// in the JSON of its answer (error_code, description, retry_after),
// whatever the HTTP status, so any whole answer is returned to be read.
func (c botClient) answer(req *http.Request) (*deliver.Answer, error) {
	ans, err := c.Caller.Do(req)
	if failed, ok := errors.AsType[*deliver.CallError](err); ok && failed.Answer != nil {
		return failed.Answer, nil
	}
	return ans, err
}
