package config

import (
	"net/url"
	"strings"
)

// Transcribe is the top-level transcribe setting: an OpenAI-compatible
// /v1/audio/transcriptions endpoint (OpenAI, Groq, a local Whisper server)
// that turns a voice note or audio message into the text the model reads.
type Transcribe struct {
	// URL is the endpoint, or the API's base (…/v1), to which
	// /audio/transcriptions is added.
	URL string `yaml:"url"`
	// Model is the model the endpoint runs (default whisper-1).
	Model string `yaml:"model"`
	// APIKeyEnv names the variable holding the API key, sent as a bearer
	// token; unset for a local server that takes none.
	APIKeyEnv string `yaml:"api_key_env"`
	// Language, an ISO-639-1 code such as en, helps the model; unset, it
	// tells the language itself.
	Language string `yaml:"language"`
}

// DefaultTranscribeModel is transcribe.model left out.
const DefaultTranscribeModel = "whisper-1"

// Endpoint is the URL transcriptions are posted to.
func (t *Transcribe) Endpoint() string {
	u := strings.TrimRight(t.URL, "/")
	if strings.HasSuffix(u, "/audio/transcriptions") {
		return u
	}
	return u + "/audio/transcriptions"
}

// ModelName is model, or DefaultTranscribeModel.
func (t *Transcribe) ModelName() string {
	if t.Model == "" {
		return DefaultTranscribeModel
	}
	return t.Model
}

// checkTranscribe is check's step for transcribe.
func (c *Config) checkTranscribe(add func(format string, a ...any)) {
	t := c.Transcribe
	if t == nil {
		return
	}
	u, err := url.Parse(t.URL)
	switch {
	case t.URL == "":
		add("transcribe.url is missing: name an OpenAI-compatible endpoint such as https://api.openai.com/v1, or leave transcribe out")
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		add("transcribe.url %q is not an http(s) URL such as https://api.openai.com/v1", t.URL)
	case u.User != nil:
		add("transcribe.url carries credentials; put the API key in an environment variable and name it in transcribe.api_key_env")
	}
	if l := t.Language; l != "" && (len(l) < 2 || len(l) > 3 || strings.ToLower(l) != l) {
		add("transcribe.language %q is not an ISO-639-1 code such as en or de; leave it out to let the model tell", l)
	}
}
