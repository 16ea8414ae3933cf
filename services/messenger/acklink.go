package messenger

import (
	"html/template"
	"net/http"

	"github.com/heraldhq/herald/pkg/envelope"
)

// Acknowledge links (public_url): a note that must be seen, mailed, links
// to /ack/<integration>/<token>. The link's GET shows a page with one
// button, whose POST acknowledges the note: mail scanners that fetch every
// link acknowledge nothing. The POST is an ingress of the integration
// (event_type ack_link, the token in ack_token) like any message a person
// sends: stored durably, and the switchboard, which holds the tokens, does
// the rest. The messenger knows no token: the page says only that the
// click was passed on.

var ackPage = template.Must(template.New("ack").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex"><title>Herald: acknowledge</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:32rem;margin:3rem auto;padding:0 1rem}button{font-size:1rem;padding:.5rem 1.25rem}</style>
</head><body>
{{if .Done}}<p>Thank you. Herald has your acknowledgement and passes it on: the note's other copies will say you saw it, and its butler is told.</p>
{{else}}<p>Saw the note Herald mailed you? Acknowledge it, and it will not be sent on to anyone else.</p>
<form method="post"><button type="submit">👀 Got it</button></form>{{end}}
</body></html>
`))

// mountAckLinks serves the links of every receiving integration on h.
func (m *Messenger) mountAckLinks(h interface {
	Handle(string, http.Handler)
}) {
	h.Handle("GET /ack/{integration}/{token}", http.HandlerFunc(m.ackPage))
	h.Handle("POST /ack/{integration}/{token}", http.HandlerFunc(m.ackPost))
}

// ackSink is the sink of the link's integration, nil for a malformed link
// or an integration that does not receive here.
func (m *Messenger) ackSink(r *http.Request) *sink {
	if !envelope.AckTokenPattern.MatchString(r.PathValue("token")) {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sinks[r.PathValue("integration")]
}

func (m *Messenger) ackPage(w http.ResponseWriter, r *http.Request) {
	if m.ackSink(r) == nil {
		http.NotFound(w, r)
		return
	}
	writeAckPage(w, false)
}

func (m *Messenger) ackPost(w http.ResponseWriter, r *http.Request) {
	s := m.ackSink(r)
	if s == nil {
		http.NotFound(w, r)
		return
	}
	token := r.PathValue("token")
	in := envelope.NewIngress(s.in.ID, s.in.Type, s.in.ID, "ack-link", "", "👀", "acklink:"+token,
		map[string]string{envelope.MetaEventType: envelope.EventAckLink, envelope.MetaAckToken: token})
	if err := s.Ingress(r.Context(), in); err != nil {
		m.log.WarnContext(r.Context(), "an acknowledge link's click was not stored; the person is asked to try again", "integration", s.in.ID, "err", err)
		http.Error(w, "Herald could not take your acknowledgement just now; please try again in a minute.", http.StatusServiceUnavailable)
		return
	}
	writeAckPage(w, true)
}

func writeAckPage(w http.ResponseWriter, done bool) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.Header().Set("X-Frame-Options", "DENY")
	_ = ackPage.Execute(w, struct{ Done bool }{done})
}
