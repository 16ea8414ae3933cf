package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	webhookspec "github.com/heraldhq/herald/pkg/channel/webhook"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

const (
	// requestTimeout bounds one POST, answer included (the specification
	// recommends 15 to 30 s).
	requestTimeout = 30 * time.Second
	// uploadTimeout bounds one POST with files (up to ten of 50 MB each),
	// which takes as long as the bytes take.
	uploadTimeout = 10 * time.Minute
	// maxAnswer is how much of a receiver's answer is read: enough for an
	// error message, never a whole page.
	maxAnswer = 64 << 10
	// userAgent names Herald to receivers.
	userAgent = "Herald-Webhook/1"
)

// sender posts to one webhook integration's recipients. It is safe for
// concurrent use.
type sender struct {
	id         string // integration id
	secretEnv  string // for messages: where the secret comes from, never the secret
	secrets    *secrets
	recipients map[string]*recipient
	names      []string // sorted, for messages
	def        string   // default recipient name; "" if none
	client     *http.Client
	uploads    *http.Client // client, with uploadTimeout
	log        *slog.Logger
	now        func() time.Time
}

// New is the deliver.Factory of webhook integrations. It reads the secret
// and checks every recipient URL without calling any, so a fleet starts
// while receivers are down. An integration without recipients is valid (it
// only receives); its deliveries fail as validation errors.
func New(in config.Integration, env deliver.Env) (deliver.Sender, error) {
	return newSender(in, env)
}

func newSender(in config.Integration, env deliver.Env) (*sender, error) {
	log := env.Log()
	c, sec, err := loadSecrets(in, env.Lookup())
	if err != nil {
		return nil, err
	}
	s := &sender{
		id:         in.ID,
		secretEnv:  c.SecretEnv,
		secrets:    sec,
		recipients: map[string]*recipient{},
		client: &http.Client{
			Timeout: env.Timeout(requestTimeout),
			// Its own connection pool, proxy included (HTTPS_PROXY: an
			// egress proxy that keeps webhooks out of internal networks).
			Transport: deliver.NewTransport(),
			// A receiver that moved is a configuration to fix, not a hop
			// to take: the signature and the body would go wherever a
			// compromised receiver points.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		log: log.With("channel", "webhook:"+in.ID),
		now: time.Now,
	}
	uploads := *s.client
	uploads.Timeout = env.Timeout(uploadTimeout)
	s.uploads = &uploads
	var hide []string
	for _, r := range sec.raw {
		hide = append(hide, r, strings.TrimPrefix(r, SecretPrefix))
	}
	scrub := deliver.NewScrubber("<redacted>", hide...)
	for name, raw := range c.Recipients {
		u, err := webhookspec.RecipientURL(raw)
		if err != nil {
			return nil, fmt.Errorf("%w: webhook integration %q: recipients.%s %s", config.ErrInvalid, in.ID, name, err)
		}
		s.recipients[name] = &recipient{url: u, call: deliver.Caller{
			Client:        s.client,
			Secrets:       scrub.WithURL(u), // a receiver may echo its URL
			MaxAnswer:     maxAnswer,
			StatusAnswers: true,
		}}
		s.names = append(s.names, name)
	}
	slices.Sort(s.names)
	s.def = c.DefaultRecipient()
	return s, nil
}

// loadSecrets checks the integration's settings and resolves and parses
// secret_env.
func loadSecrets(in config.Integration, getenv config.Getenv) (*Config, *secrets, error) {
	c, err := config.CheckedSettings[*Config](&in)
	if err != nil {
		return nil, nil, err
	}
	value, err := config.Secret(getenv, c.SecretEnv, "")
	if err != nil {
		return nil, nil, fmt.Errorf("webhook integration %q: secret_env: %w; set it to the integration's Standard Webhooks secret (whsec_…)", in.ID, err)
	}
	sec, err := parseSecrets(value)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: webhook integration %q: the value of secret_env %s: %w", config.ErrInvalid, in.ID, c.SecretEnv, err)
	}
	return c, sec, nil
}

// recipient is one of the integration's recipients: where its webhooks go,
// and the Caller that posts them there, scrubbing the secrets and the URL's
// tokens from every error.
type recipient struct {
	url  *url.URL
	call deliver.Caller
}

// Close releases idle connections (deliver.Closer).
func (s *sender) Close() error {
	s.client.CloseIdleConnections()
	return nil
}

// payload is the body of an outbound webhook (see the package doc). Its
// fields all come from the delivery, so every attempt sends the same bytes.
type payload struct {
	Type       string `json:"type"`
	DeliveryID string `json:"delivery_id"`
	Intent     string `json:"intent"`
	Butler     string `json:"butler,omitempty"`
	Recipient  string `json:"recipient"`
	Message    string `json:"message,omitempty"`
	Subject    string `json:"subject,omitempty"`
	Emoji      string `json:"emoji,omitempty"`
	Urgency    string `json:"urgency"`
	Topic      string `json:"topic,omitempty"`
	Level      string `json:"level,omitempty"`
	Thread     string `json:"thread,omitempty"`
	Sender     string `json:"sender,omitempty"`
	// Files describe the file parts of a multipart webhook (files.go).
	Files []filePart `json:"files,omitempty"`
}

// Deliver posts the notify to its recipient as one signed webhook: JSON,
// or multipart/form-data when it has files.
func (s *sender) Deliver(ctx context.Context, d deliver.Delivery) (deliver.Receipt, error) {
	if len(d.Done) > 0 {
		// An earlier attempt delivered it.
		return deliver.Receipt{MessageIDs: d.Done}, nil
	}
	intent, err := checkIntent(d)
	if err != nil {
		return deliver.Receipt{}, err
	}
	name, r, err := s.recipient(d, intent)
	if err != nil {
		return deliver.Receipt{}, err
	}
	id := envelope.DeliveryID(d.Key)
	if d.Key == "" {
		// Only a caller outside the messenger has no key; give it an id of
		// its own rather than one every such delivery would share.
		id = envelope.DeliveryID(strings.ReplaceAll(envelope.NewRequestID(), "-", ""))
	}
	urgency := d.Urgency
	if urgency == "" {
		urgency = "normal"
	}
	js, err := json.Marshal(payload{
		Type: "notify." + intent, DeliveryID: id, Intent: intent, Butler: d.Butler, Recipient: name,
		Message: d.Message, Subject: d.Subject, Emoji: d.Emoji, Urgency: urgency, Topic: d.Topic, Level: d.Level,
		Thread: d.Thread, Sender: d.Sender, Files: fileParts(d.Files),
	})
	if err != nil {
		return deliver.Receipt{}, fmt.Errorf("%w: encoding the webhook: %w", envelope.ErrInternal, err)
	}
	return s.post(ctx, d, id, name, r, js)
}

// checkIntent is the delivery's intent ("" is send), or why it cannot be
// sent.
func checkIntent(d deliver.Delivery) (string, error) {
	switch d.Intent {
	case "", envelope.IntentSend, envelope.IntentReply:
		if err := d.NeedsText(); err != nil {
			return "", err
		}
		if d.Intent == "" {
			return envelope.IntentSend, nil
		}
		return d.Intent, nil
	case envelope.IntentReact:
		if strings.TrimSpace(d.Emoji) == "" {
			return "", fmt.Errorf("%w: react needs an emoji; the webhook carries it to the receiver as an event with intent react", envelope.ErrValidation)
		}
		return d.Intent, nil
	}
	return "", fmt.Errorf("%w: intent %q is not one of send, reply, react", envelope.ErrValidation, d.Intent)
}

// post signs the webhook of payload js (and d's files) and POSTs it to r.
func (s *sender) post(ctx context.Context, d deliver.Delivery, id, name string, r *recipient, js []byte) (deliver.Receipt, error) {
	dest := s.describe(name, r.url)
	if err := ctx.Err(); err != nil {
		// Not called: nothing to record as in flight.
		return deliver.Receipt{}, fmt.Errorf("%w: the webhook to %s was not sent: %w", envelope.ErrTargetUnavailable, dest, err)
	}
	now := s.now()
	b, err := s.newBody(id, now, js, d.Files)
	if err != nil {
		return deliver.Receipt{}, err
	}
	defer b.close()
	req, err := b.request(ctx, r.url)
	if err != nil {
		return deliver.Receipt{}, fmt.Errorf("%w: building the request to %s failed; check recipients.%s", envelope.ErrValidation, dest, name)
	}
	req.Header.Set("User-Agent", userAgent)
	req.Header.Set(HeaderID, id)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
	if err := d.Calling(); err != nil {
		return deliver.Receipt{}, err
	}
	call := r.call
	if b.files > 0 {
		call.Client = s.uploads
	}
	ans, err := call.Do(req)
	if err != nil {
		return deliver.Receipt{}, s.failed(ctx, dest, name, r, b, err)
	}
	s.log.Debug("webhook delivered", "recipient", name, "delivery_id", id, "status", ans.Status)
	return d.SentOne(id, "webhook delivery")
}

// recipient resolves the delivery's recipient name: the one given, else for
// a reply or reaction the recipient named like the inbound sender, else the
// default.
func (s *sender) recipient(d deliver.Delivery, intent string) (string, *recipient, error) {
	name := strings.TrimSpace(d.Recipient)
	if name == "" && intent != envelope.IntentSend {
		if r := s.recipients[strings.TrimSpace(d.Sender)]; r != nil {
			return strings.TrimSpace(d.Sender), r, nil
		}
	}
	if name == "" {
		name = s.def
	}
	if name == "" {
		if len(s.names) == 0 {
			return "", nil, fmt.Errorf("%w: webhook integration %q has no recipients: add a name and URL under its recipients", envelope.ErrValidation, s.id)
		}
		return "", nil, fmt.Errorf("%w: no webhook recipient given and integration %q has no default_recipient: set the notify's recipient to one of %s, or set default_recipient",
			envelope.ErrValidation, s.id, s.list())
	}
	r := s.recipients[name]
	if r == nil {
		if len(s.names) == 0 {
			return "", nil, fmt.Errorf("%w: webhook integration %q has no recipients: add a name and URL under its recipients", envelope.ErrValidation, s.id)
		}
		return "", nil, fmt.Errorf("%w: %q is not a recipient of webhook integration %q: the recipient is a name, one of %s (URLs are configured, never given in a notify)",
			envelope.ErrValidation, deliver.Clip(name, 100), s.id, s.list())
	}
	return name, r, nil
}

// list is the configured recipient names, for messages.
func (s *sender) list() string {
	if len(s.names) == 0 {
		return "none"
	}
	q := make([]string, len(s.names))
	for i, n := range s.names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}

// describe names a recipient for messages: its name and its URL without
// user, path or query, which may carry a token.
func (s *sender) describe(name string, u *url.URL) string {
	return fmt.Sprintf("webhook recipient %q (%s)", name, redact(u))
}

// redact is the part of a URL that is safe to show: scheme://host.
func redact(u *url.URL) string {
	if u == nil {
		return "?"
	}
	return u.Scheme + "://" + u.Host
}
