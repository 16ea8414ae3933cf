package messenger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"strings"
	"time"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

// A voice note or audio message is transcribed before it is stored, so the
// model reads what was said (meta transcript "true"); the audio stays an
// attachment it may download. Transcription that fails never holds the
// message back: it arrives with the attachment and meta transcript_error.

const (
	// MetaTranscript marks a message whose text is a transcript;
	// MetaTranscriptError says why one was not made.
	MetaTranscript      = "transcript"
	MetaTranscriptError = "transcript_error"
	// maxTranscribe is the largest audio the transcription API takes
	// (OpenAI's and Groq's 25 MB).
	maxTranscribe = 25 << 20
	// transcribeFor bounds one transcription: the receiver waits for it
	// before it confirms the message to its provider.
	transcribeFor = 45 * time.Second
)

// transcriber posts audio to an OpenAI-compatible /audio/transcriptions.
type transcriber struct {
	cfg    config.Transcribe
	key    string
	client *http.Client
	scrub  *deliver.Scrubber
}

func newTranscriber(t *config.Transcribe, getenv config.Getenv) *transcriber {
	if t == nil {
		return nil
	}
	key := ""
	if t.APIKeyEnv != "" {
		key = getenv(t.APIKeyEnv)
	}
	return &transcriber{cfg: *t, key: key, client: &http.Client{Timeout: transcribeFor}, scrub: deliver.NewScrubber("<api key>", key)}
}

// transcribe turns the first audio attachment of in, which came on
// integration on, into its text. Only a message with audio is touched.
func (m *Messenger) transcribe(ctx context.Context, on *config.Integration, in *envelope.Ingress) {
	if m.transcriber == nil {
		return
	}
	i := audioAttachment(in.Attachments)
	if i < 0 {
		return
	}
	if in.Meta == nil {
		in.Meta = map[string]string{}
	}
	text, err := m.transcribeOne(ctx, on, in.Attachments[i])
	if err != nil {
		m.log.WarnContext(ctx, "a voice message was not transcribed; it reaches the model as an attachment", "integration", on.ID, "request_id", in.RequestContext.RequestID, "err", err)
		in.Meta[MetaTranscriptError] = deliver.Clip("not transcribed: "+err.Error(), 300)
		return
	}
	if c := strings.TrimSpace(in.Content.Text); c != "" {
		text = c + "\n\n" + text // a caption, then what was said
	}
	in.Content.Text = deliver.Clip(text, deliver.MaxText)
	in.Meta[MetaTranscript] = "true"
}

// audioAttachment is the index of the first voice or audio file, or -1.
func audioAttachment(atts []envelope.Attachment) int {
	for i, a := range atts {
		if strings.HasPrefix(a.Mime, "audio/") {
			return i
		}
	}
	return -1
}

// transcribeOne streams attachment a from where it is kept to the
// transcription endpoint and returns the text.
func (m *Messenger) transcribeOne(ctx context.Context, on *config.Integration, a envelope.Attachment) (string, error) {
	if a.Size > maxTranscribe {
		return "", fmt.Errorf("%s is %s, over the transcription API's %s", a.Name, bus.Bytes(a.Size), bus.Bytes(maxTranscribe))
	}
	ctx, cancel := context.WithTimeout(ctx, transcribeFor)
	defer cancel()
	fetch, err := m.fetcher(ctx, on, a)
	if err != nil {
		return "", err
	}
	t := m.transcriber
	body, w := io.Pipe()
	form := multipart.NewWriter(w)
	go func() { _ = w.CloseWithError(t.writeForm(form, a, fetch)) }()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.cfg.Endpoint(), body)
	if err != nil {
		_ = body.CloseWithError(err)
		return "", err
	}
	req.Header.Set("Content-Type", form.FormDataContentType())
	if t.key != "" {
		req.Header.Set("Authorization", "Bearer "+t.key)
	}
	resp, err := t.client.Do(req)
	_ = body.CloseWithError(errors.New("request ended"))
	if err != nil {
		return "", errors.New(t.scrub.Scrub(err.Error()))
	}
	defer resp.Body.Close()
	var out struct {
		Text  string `json:"text"`
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, deliver.MaxText*4)).Decode(&out); err != nil && resp.StatusCode == http.StatusOK {
		return "", fmt.Errorf("the transcription endpoint answered what is not its JSON: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		why := resp.Status
		if out.Error != nil && out.Error.Message != "" {
			why += ": " + out.Error.Message
		}
		return "", fmt.Errorf("the transcription endpoint answered %s", t.scrub.Scrub(why))
	}
	if strings.TrimSpace(out.Text) == "" {
		return "", errors.New("the transcription endpoint heard no speech")
	}
	return strings.TrimSpace(out.Text), nil
}

// writeForm writes the request's form: the audio as the file part, then
// model, language and the answer's format.
func (t *transcriber) writeForm(form *multipart.Writer, a envelope.Attachment, fetch func(io.Writer) error) error {
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", multipart.FileContentDisposition("file", audioName(a)))
	h.Set("Content-Type", a.Mime)
	part, err := form.CreatePart(h)
	if err != nil {
		return err
	}
	if err := fetch(part); err != nil {
		return err
	}
	fields := [][2]string{{"model", t.cfg.ModelName()}, {"response_format", "json"}}
	if t.cfg.Language != "" {
		fields = append(fields, [2]string{"language", t.cfg.Language})
	}
	for _, f := range fields {
		if err := form.WriteField(f[0], f[1]); err != nil {
			return err
		}
	}
	return form.Close()
}

// audioName is the file name sent: the API tells the format by its
// extension, which Telegram's voice notes (.oga) and some names lack.
func audioName(a envelope.Attachment) string {
	ext := map[string]string{"audio/ogg": ".ogg", "audio/mpeg": ".mp3", "audio/mp4": ".m4a", "audio/x-m4a": ".m4a", "audio/wav": ".wav", "audio/x-wav": ".wav", "audio/webm": ".webm", "audio/flac": ".flac"}[strings.SplitN(a.Mime, ";", 2)[0]]
	name := a.Name
	if name == "" {
		name = "audio"
	}
	if ext != "" && !strings.HasSuffix(strings.ToLower(name), ext) {
		name = strings.TrimSuffix(name, ".oga") + ext
	}
	return name
}
