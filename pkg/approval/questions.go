package approval

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/bus"
)

// A question is the ask tool's: a butler asks its human something, with up
// to MaxOptions answers to tap or a free-text reply, and the answer comes
// back once. It lives beside the prompts, at "<butler>.q.<id>": the butler
// writes it (its own key), the switchboard answers it by compare-and-set,
// and copies, sent-to records and closing work as for prompts.

// MaxOptions bounds a question's options: a phone's screen of buttons.
const MaxOptions = 8

// Question is one open (or answered) question.
type Question struct {
	ID       string   `json:"id"`
	Butler   string   `json:"butler"`
	Session  string   `json:"session"`
	Question string   `json:"question"`
	Options  []string `json:"options,omitempty"`
	// CreatedAt and ExpiresAt as a prompt's (ExpiresAt zero: never).
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	// Answer is empty while open; AnsweredBy and Via say who and where.
	Answer     string    `json:"answer,omitempty"`
	AnsweredBy string    `json:"answered_by,omitempty"`
	Via        string    `json:"via,omitempty"`
	AnsweredAt time.Time `json:"answered_at,omitzero"`
	// Closed is "expired" once nobody answered in time.
	Closed string `json:"closed,omitempty"`
	// ClosedAt and Unfinished as a prompt's AnsweredAt and Unfinished,
	// for a question closed unanswered.
	ClosedAt   time.Time `json:"closed_at,omitzero"`
	Unfinished bool      `json:"unfinished,omitempty"`
	// ReturnedAt is when its butler gave the answer to the model as the
	// result of the ask call that waited for it. The butler records it
	// before it returns the answer, so a butler restarted later drops the
	// answer's channel message instead of pushing it a second time.
	ReturnedAt time.Time `json:"returned_at,omitzero"`
}

// QuestionIDPattern is the shape of question ids: "q" and 9 letters.
var QuestionIDPattern = regexp.MustCompile(`^q[a-km-z]{9}$`)

// NewQuestionID is a fresh question id.
func NewQuestionID() string {
	const letters = "abcdefghijkmnopqrstuvwxyz" // no l, as prompt ids
	b := make([]byte, 9)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = letters[int(b[i])%len(letters)]
	}
	return "q" + string(b)
}

// AnswerPattern matches the data of an option's button, "ask:<id>:<n>".
var AnswerPattern = regexp.MustCompile(`^ask:(q[a-km-z]{9}):([0-9])$`)

// QuestionKey is the idempotency_key of the notify that asks question id.
func QuestionKey(id string) string { return "ask." + id }

// QuestionOf is the question id a notify's idempotency_key names, "" if
// it asks none.
func QuestionOf(key string) string {
	id, ok := strings.CutPrefix(key, "ask.")
	if !ok || !QuestionIDPattern.MatchString(id) {
		return ""
	}
	return id
}

// AnswerData is the button data of option n of question id.
func AnswerData(id string, n int) string { return "ask:" + id + ":" + strconv.Itoa(n) }

// questionKey is "<butler>.q.<id>": a butler may read back its questions
// ("<its name>.q.>") and not its prompts.
func questionKey(butler, id string) string { return butler + ".q." + id }

// QuestionKeys is the subject-style filter of butler's questions' keys.
func QuestionKeys(butler string) string { return butler + ".q.>" }

// Ask records q, which must be new.
func (s *Store) Ask(ctx context.Context, q Question) error {
	if !QuestionIDPattern.MatchString(q.ID) {
		return fmt.Errorf("question id %q is not one NewQuestionID makes", q.ID)
	}
	b, err := json.Marshal(q)
	if err != nil {
		return err
	}
	if _, err := s.kv.Create(ctx, questionKey(q.Butler, q.ID), b); err != nil {
		if errors.Is(err, jetstream.ErrKeyExists) {
			return ErrExists
		}
		return err
	}
	return nil
}

// Question is butler's question id.
func (s *Store) Question(ctx context.Context, butler, id string) (*Question, error) {
	q, _, err := s.question(ctx, butler, id)
	return q, err
}

// question is butler's question id and its revision.
func (s *Store) question(ctx context.Context, butler, id string) (*Question, uint64, error) {
	e, err := s.kv.Get(ctx, questionKey(butler, id))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, ErrUnknown
	}
	if err != nil {
		return nil, 0, err
	}
	var q Question
	if err := json.Unmarshal(e.Value(), &q); err != nil {
		return nil, 0, fmt.Errorf("question %s: %w", id, err)
	}
	return &q, e.Revision(), nil
}

// ErrNotAnOption: a typed answer to a question with options is none of them.
var ErrNotAnOption = errors.New("not one of the question's options")

// Pick is the option text answers: its number (1-based) or its label, any
// case; ErrNotAnOption for anything else. A question without options takes
// any text.
func (q *Question) Pick(text string) (string, error) {
	text = strings.TrimSpace(text)
	if len(q.Options) == 0 {
		if text == "" {
			return "", ErrNotAnOption
		}
		return text, nil
	}
	// A mail's reply quotes the question under the answer: its first line
	// is the answer.
	first, _, _ := strings.Cut(text, "\n")
	for _, t := range []string{text, strings.TrimSpace(first)} {
		if n, err := strconv.Atoi(strings.TrimSuffix(t, ".")); err == nil && n >= 1 && n <= len(q.Options) {
			return q.Options[n-1], nil
		}
		for _, o := range q.Options {
			if strings.EqualFold(o, t) {
				return o, nil
			}
		}
	}
	return "", ErrNotAnOption
}

// AnswerQuestion records answer to butler's question id, once: a second
// answer, an expired question or an unknown id changes nothing and says why
// (ErrUsed, ErrExpired, ErrUnknown), with the question as it stands.
func (s *Store) AnswerQuestion(ctx context.Context, butler, id, answer, by, via string) (*Question, error) {
	q, rev, err := s.question(ctx, butler, id)
	if err != nil {
		return nil, err
	}
	switch {
	case q.Answer != "":
		return q, ErrUsed
	case q.Closed != "", !q.ExpiresAt.IsZero() && s.now().After(q.ExpiresAt):
		return q, ErrExpired
	}
	q.Answer, q.AnsweredBy, q.Via, q.AnsweredAt = answer, by, via, s.now().UTC()
	b, err := json.Marshal(q)
	if err != nil {
		return nil, err
	}
	if _, err := s.kv.Update(ctx, questionKey(butler, id), b, rev); err != nil {
		return q, ErrUsed
	}
	return q, nil
}

// Returned records that butler's question id's answer was returned to the
// model (ReturnedAt), once; it is an error if the question has no answer.
func (s *Store) Returned(ctx context.Context, butler, id string) error {
	return bus.ChangeJSON(ctx, s.kv, questionKey(butler, id), func(q *Question, found bool) (bool, error) {
		switch {
		case !found:
			return false, ErrUnknown
		case q.Answer == "":
			return false, fmt.Errorf("question %s has no answer to return", id)
		case !q.ReturnedAt.IsZero():
			return false, nil
		}
		q.ReturnedAt = s.now().UTC()
		return true, nil
	})
}

// FinishQuestion records that the close of butler's question id is
// finished (Question.Unfinished): its audit record stored, its copies
// edited.
func (s *Store) FinishQuestion(ctx context.Context, butler, id string) error {
	return finish(ctx, s, questionKey(butler, id), func(q *Question) *bool { return &q.Unfinished })
}

// ExpireQuestions closes the open questions whose time is over at now,
// once each, and returns them.
func (s *Store) ExpireQuestions(ctx context.Context, now time.Time) ([]Question, error) {
	keys, err := s.keys(ctx, "*.q.*")
	if err != nil {
		return nil, err
	}
	var out []Question
	for _, k := range keys {
		e, err := s.kv.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return out, err
		}
		var q Question
		if json.Unmarshal(e.Value(), &q) != nil {
			continue
		}
		if q.Unfinished && now.Sub(q.ClosedAt) > FinishGrace {
			out = append(out, q) // closed by a switchboard killed before it finished
			continue
		}
		if q.Answer != "" || q.Closed != "" || q.ExpiresAt.IsZero() || !now.After(q.ExpiresAt) {
			continue
		}
		q.Closed, q.ClosedAt, q.Unfinished = Expired, now.UTC(), true
		b, err := json.Marshal(q)
		if err != nil {
			return out, err
		}
		if _, err := s.kv.Update(ctx, k, b, e.Revision()); err != nil {
			continue
		}
		out = append(out, q)
	}
	return out, nil
}

func replyKey(integration, chat, messageID string) string {
	return "_qmsg." + integration + "." + encodeChat(chat) + "." + encodeChat(messageID)
}

// Replied records that message messageID in chat on integration is a copy
// of butler's question id, so a reply to it answers the question.
func (s *Store) Replied(ctx context.Context, integration, chat, messageID, butler, id string) error {
	_, err := s.kv.Put(ctx, replyKey(integration, chat, messageID), []byte(butler+"."+id))
	return err
}

// RepliedTo is the butler and question a reply to message messageID in
// chat answers; ErrUnknown if none.
func (s *Store) RepliedTo(ctx context.Context, integration, chat, messageID string) (butler, id string, err error) {
	e, err := s.kv.Get(ctx, replyKey(integration, chat, messageID))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return "", "", ErrUnknown
	}
	if err != nil {
		return "", "", err
	}
	butler, id, _ = strings.Cut(string(e.Value()), ".")
	return butler, id, nil
}
