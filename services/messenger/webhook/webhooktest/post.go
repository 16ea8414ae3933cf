package webhooktest

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"io"
	"net/http"
	"strconv"
	"time"
)

// PostOptions shape what Post sends; the zero value sends a correctly
// signed request with a fresh id and the current time.
type PostOptions struct {
	// ID is the webhook-id; "" makes a fresh "msg_…" one. Give the ID of
	// an earlier Response to send a repeat.
	ID string
	// Timestamp is the webhook-timestamp; zero is now.
	Timestamp time.Time
	// BadSignature signs with another key.
	BadSignature bool
	// Bearer sends "Authorization: Bearer <secret>" instead of a
	// signature (the webhook-id is still sent, unless NoID).
	Bearer bool
	// Unsigned sends no credentials at all (the webhook-id is still sent,
	// unless NoID).
	Unsigned bool
	// NoID leaves webhook-id out (with Bearer or Unsigned).
	NoID bool
	// Header adds or replaces headers after signing.
	Header http.Header
	// Client sends the request; nil is a client with a 10-second timeout.
	Client *http.Client
}

// Response is what the endpoint answered.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
	// ID is the webhook-id that was sent.
	ID string
}

// Post signs body with secret per Standard Webhooks and POSTs it to url as
// application/json.
func Post(url, secret string, body []byte, opts PostOptions) (*Response, error) {
	id := opts.ID
	if id == "" {
		b := make([]byte, 12)
		_, _ = rand.Read(b)
		id = "msg_" + hex.EncodeToString(b)
	}
	ts := opts.Timestamp
	if ts.IsZero() {
		ts = time.Now()
	}
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if !opts.NoID || (!opts.Bearer && !opts.Unsigned) {
		req.Header.Set("webhook-id", id)
	}
	switch {
	case opts.Bearer:
		req.Header.Set("Authorization", "Bearer "+secret)
	case opts.Unsigned:
	default:
		key := secret
		if opts.BadSignature {
			key = "whsec_" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("wrong key "), 4))
		}
		sig, err := Sign(key, id, ts.Unix(), body)
		if err != nil {
			return nil, err
		}
		req.Header.Set("webhook-timestamp", strconv.FormatInt(ts.Unix(), 10))
		req.Header.Set("webhook-signature", sig)
	}
	for k, vs := range opts.Header {
		req.Header.Del(k)
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	client := opts.Client
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	r := &Response{Status: resp.StatusCode, Header: resp.Header, Body: data}
	if req.Header.Get("webhook-id") != "" {
		r.ID = id
	}
	return r, nil
}
