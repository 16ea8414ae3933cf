package delivertest

import (
	"log/slog"
	"strconv"
	"strings"
	"testing"

	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

// Env is the deliver.Env a test builds a channel with: Getenv knows vars
// (a token_env and its token) and nothing else, and the log, at debug
// level, goes to the test's output.
func Env(t testing.TB, vars map[string]string) deliver.Env {
	return deliver.Env{
		Getenv: func(k string) string { return vars[k] },
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
}

// Paragraphs returns LongMessage for a harness: markdown of n paragraphs of
// words words each, numbered, which a channel whose limit fits one
// paragraph but never two sends as exactly n chunks.
func Paragraphs(words int) func(n int) string {
	return func(n int) string {
		paras := make([]string, n)
		for i := range n {
			paras[i] = strconv.Itoa(i) + strings.Repeat(" word", words)
		}
		return strings.Join(paras, "\n\n")
	}
}

// NewSender builds a sender with factory from in, once edit adjusted it,
// as a messenger would from herald.yaml. It fails t if factory does, and
// closes the sender when the test ends if it is a deliver.Closer.
func NewSender(t testing.TB, factory deliver.Factory, in config.Integration, env deliver.Env, edit ...func(*config.Integration)) deliver.Sender {
	t.Helper()
	for _, e := range edit {
		e(&in)
	}
	s, err := factory(in, env)
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := s.(deliver.Closer); ok {
		t.Cleanup(func() { _ = c.Close() })
	}
	return s
}

// CheckError fails t unless err has class and its message says says (what
// to do about it), and if the message shows one of secrets.
func CheckError(t testing.TB, err error, class, says string, secrets ...string) {
	t.Helper()
	if got := envelope.ClassOf(err); got != class {
		t.Fatalf("deliver: %v (class %s), want class %s", err, got, class)
	}
	if !strings.Contains(err.Error(), says) {
		t.Errorf("error %q does not say %q", err, says)
	}
	for _, secret := range secrets {
		if strings.Contains(err.Error(), secret) {
			t.Errorf("error %q shows a secret", err)
		}
	}
}

// ErrorCase is a provider fault and the error a sender must report for
// it; F is the fake the fault is injected into.
type ErrorCase[F any] struct {
	Name  string
	Fault func(F)
	// Class is the error's class, Says part of its message that tells what
	// to do.
	Class, Says string
}

// RunErrorCases runs each case as a subtest on a fake and a sender fresh
// from setup: it injects the fault, delivers a message and checks the
// error with CheckError, which must not show secrets.
func RunErrorCases[F any](t *testing.T, cases []ErrorCase[F], setup func(t *testing.T) (fake F, s deliver.Sender, secrets []string)) {
	for _, tt := range cases {
		t.Run(tt.Name, func(t *testing.T) {
			fake, s, secrets := setup(t)
			tt.Fault(fake)
			_, err := s.Deliver(t.Context(), deliver.Delivery{Message: "x"})
			CheckError(t, err, tt.Class, tt.Says, secrets...)
		})
	}
}
