package messenger_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/bus/bustest"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/services/messenger"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

// voiceNote is a receiver that hands over one voice note, its audio held
// in herald_files as a file that came with the message.
type voiceNote struct {
	js    jetstream.JetStream
	audio []byte
	done  chan struct{}
}

func (v *voiceNote) Receive(ctx context.Context, sink deliver.Sink) error {
	ref, sum, err := bus.HoldFile(ctx, v.js, "tg_in", bytes.NewReader(v.audio), 1<<20)
	if err != nil {
		return err
	}
	in := envelope.NewIngress("", "telegram", "tg_in", "42", "42:7", "", "1:700", map[string]string{"chat_id": "42"})
	in.Attachments = []envelope.Attachment{{Name: "voice.ogg", Mime: "audio/ogg", Size: sum.Size, Ref: ref}}
	if err := sink.Ingress(ctx, in); err != nil {
		return err
	}
	close(v.done)
	<-ctx.Done()
	return nil
}

// transcription is a stand-in of /v1/audio/transcriptions: it reads the
// multipart form as the API does and answers status with text.
type transcription struct {
	mu     sync.Mutex
	status int
	got    map[string]string // form fields, "file", "filename", "auth"
}

func (s *transcription) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/audio/transcriptions" || r.ParseMultipartForm(1<<20) != nil {
		http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
		return
	}
	got := map[string]string{"auth": r.Header.Get("Authorization")}
	for k, v := range r.MultipartForm.Value {
		got[k] = v[0]
	}
	if fh := r.MultipartForm.File["file"]; len(fh) == 1 {
		f, _ := fh[0].Open()
		b, _ := io.ReadAll(f)
		got["file"], got["filename"], got["file_type"] = string(b), fh[0].Filename, fh[0].Header.Get("Content-Type")
	}
	s.mu.Lock()
	s.got = got
	status := s.status
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if status != http.StatusOK {
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`{"error":{"message":"the model is overloaded","type":"server_error"}}`))
		return
	}
	_, _ = w.Write([]byte(`{"text":" Remind me to water the plants at six. "}`))
}

// runVoice runs a messenger with transcribe pointing at api, hands it one
// voice note and returns the ingress it stored.
func runVoice(t *testing.T, api *transcription) envelope.Ingress {
	t.Helper()
	hs := httptest.NewServer(api)
	t.Cleanup(hs.Close)
	srv := bustest.RunServer(t)
	nc, js := srv.Connect()
	cfg, err := config.Parse([]byte("transcribe: {url: " + hs.URL + "/v1, api_key_env: STT_KEY, language: en}\nintegrations: [{id: tg_in, type: telegram, token_env: T, inbound: {allow_from: ['42']}}]"))
	if err != nil {
		t.Fatal(err)
	}
	v := &voiceNote{js: js, audio: []byte("OggS\x00\x02 a voice note"), done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() {
		stopped <- messenger.Run(ctx, messenger.Options{Config: cfg, NC: nc, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Getenv:    func(k string) string { return map[string]string{"T": "1:secret", "STT_KEY": "sk-test-key"}[k] },
			Receivers: map[string]deliver.ReceiverFactory{"telegram": func(config.Integration, deliver.Env) (deliver.Receiver, error) { return v, nil }},
		})
	}()
	t.Cleanup(func() { cancel(); <-stopped })
	select {
	case <-v.done:
	case <-time.After(20 * time.Second):
		t.Fatal("the voice note was not taken")
	}
	stream, err := js.Stream(t.Context(), bus.StreamIngress)
	if err != nil {
		t.Fatal(err)
	}
	m, err := stream.GetLastMsgForSubject(t.Context(), bus.IngressSubject("telegram"))
	if err != nil {
		t.Fatal(err)
	}
	var in envelope.Ingress
	if err := json.Unmarshal(m.Data, &in); err != nil {
		t.Fatal(err)
	}
	return in
}

// TestVoiceIsTranscribed: with transcribe set, a voice note's audio goes to
// the endpoint as the transcription API takes it (the file part, model,
// language, the key as a bearer token) and its text becomes the message,
// marked transcript; the audio stays an attachment.
func TestVoiceIsTranscribed(t *testing.T) {
	api := &transcription{status: http.StatusOK}
	in := runVoice(t, api)
	if in.Content.Text != "Remind me to water the plants at six." || in.Meta[messenger.MetaTranscript] != "true" {
		t.Errorf("stored text %q, meta %v; want the transcript, marked", in.Content.Text, in.Meta)
	}
	if len(in.Attachments) != 1 || in.Attachments[0].Name != "voice.ogg" {
		t.Errorf("attachments %+v, want the voice note still", in.Attachments)
	}
	got := api.got
	want := map[string]string{"auth": "Bearer sk-test-key", "model": "whisper-1", "language": "en", "response_format": "json",
		"file": "OggS\x00\x02 a voice note", "filename": "voice.ogg", "file_type": "audio/ogg"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("the endpoint got %s = %q, want %q", k, got[k], v)
		}
	}
}

// TestFailedTranscriptionStillDelivers: the endpoint failing, the message
// arrives all the same, with its attachment and a note why.
func TestFailedTranscriptionStillDelivers(t *testing.T) {
	in := runVoice(t, &transcription{status: http.StatusServiceUnavailable})
	if in.Content.Text != "" || in.Meta[messenger.MetaTranscript] != "" || len(in.Attachments) != 1 {
		t.Errorf("stored %q, meta %v, %d attachments", in.Content.Text, in.Meta, len(in.Attachments))
	}
	if note := in.Meta[messenger.MetaTranscriptError]; note != "not transcribed: the transcription endpoint answered 503 Service Unavailable: the model is overloaded" {
		t.Errorf("transcript_error %q", note)
	}
}
