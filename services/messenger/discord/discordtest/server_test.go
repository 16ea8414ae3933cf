package discordtest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/heraldhq/herald/services/messenger/discord/discordtest"
)

const wait = 5 * time.Second

// answer is a REST answer: its status, headers and JSON.
type answer struct {
	Status int
	Header http.Header
	Body   map[string]any
	Raw    string
}

func (a answer) code() int { f, _ := a.Body["code"].(float64); return int(f) }

// call sends a REST request as a bot would (auth "" sends none).
func call(t *testing.T, srv *discordtest.Server, method, path, auth string, body any) answer {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, srv.URL()+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := answer{Status: resp.StatusCode, Header: resp.Header, Raw: string(raw)}
	_ = json.Unmarshal(raw, &a.Body)
	return a
}

func post(t *testing.T, srv *discordtest.Server, channel string, body any) answer {
	t.Helper()
	return call(t, srv, "POST", "/channels/"+channel+"/messages", "Bot "+srv.Token(), body)
}

func TestCreateMessage(t *testing.T) {
	srv := discordtest.NewServer(t)
	a := post(t, srv, discordtest.ChannelGeneral, map[string]any{"content": "hello", "flags": 4,
		"components": []any{map[string]any{"type": 1, "components": []any{map[string]any{"type": 2, "style": 3, "label": "Allow", "custom_id": "perm:allow:abcde"}}}}})
	if a.Status != 200 || a.Body["content"] != "hello" || a.Body["channel_id"] != discordtest.ChannelGeneral || a.Body["type"] != float64(0) {
		t.Fatalf("answer %d %s", a.Status, a.Raw)
	}
	if author, _ := a.Body["author"].(map[string]any); author["id"] != discordtest.BotID || author["bot"] != true {
		t.Errorf("author %v, want the bot", a.Body["author"])
	}
	for _, h := range []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "X-RateLimit-Reset-After", "X-RateLimit-Bucket"} {
		if a.Header.Get(h) == "" {
			t.Errorf("no %s header", h)
		}
	}
	id, _ := a.Body["id"].(string)
	if m, ok := srv.Message(discordtest.ChannelGeneral, id); !ok || len(m.Components) != 1 {
		t.Errorf("the fake holds %+v", m)
	}
	c := srv.Calls(discordtest.RouteCreateMessage)[0]
	if c.Create == nil || c.Create.Content != "hello" || c.Message != id || c.Channel != discordtest.ChannelGeneral || !c.OK() {
		t.Errorf("call %+v", c)
	}

	reply := post(t, srv, discordtest.ChannelGeneral, map[string]any{"content": "re", "message_reference": map[string]any{"message_id": id}})
	if reply.Status != 200 || reply.Body["type"] != float64(discordtest.MessageReply) {
		t.Errorf("reply %d %s", reply.Status, reply.Raw)
	}
}

func TestRefusals(t *testing.T) {
	srv := discordtest.NewServer(t)
	srv.SetRateLimit(100, time.Minute) // refused calls count too
	button := func(b map[string]any) map[string]any {
		return map[string]any{"content": "x", "components": []any{map[string]any{"type": 1, "components": []any{b}}}}
	}
	tests := []struct {
		name         string
		method, path string
		auth         string
		body         any
		status, code int
		field        string // in a 50035's errors
	}{
		{"no token", "POST", "/channels/" + discordtest.ChannelGeneral + "/messages", "", map[string]any{"content": "x"}, 401, 0, ""},
		{"wrong token", "POST", "/channels/" + discordtest.ChannelGeneral + "/messages", "Bot nope", map[string]any{"content": "x"}, 401, 0, ""},
		{"unknown channel", "POST", "/channels/1/messages", "ok", map[string]any{"content": "x"}, 404, 10003, ""},
		{"too long", "POST", "/channels/" + discordtest.ChannelGeneral + "/messages", "ok", map[string]any{"content": strings.Repeat("é", 2001)}, 400, 50035, "content"},
		{"empty", "POST", "/channels/" + discordtest.ChannelGeneral + "/messages", "ok", map[string]any{"content": " "}, 400, 50006, ""},
		{"unknown flags", "POST", "/channels/" + discordtest.ChannelGeneral + "/messages", "ok", map[string]any{"content": "x", "flags": 1}, 400, 50035, "flags"},
		{"reply to an unknown message", "POST", "/channels/" + discordtest.ChannelGeneral + "/messages", "ok",
			map[string]any{"content": "x", "message_reference": map[string]any{"message_id": "1"}}, 400, 50035, "message_reference"},
		{"custom_id too long", "POST", "/channels/" + discordtest.ChannelGeneral + "/messages", "ok",
			button(map[string]any{"type": 2, "style": 1, "label": "x", "custom_id": strings.Repeat("d", 101)}), 400, 50035, "components"},
		{"button without custom_id", "POST", "/channels/" + discordtest.ChannelGeneral + "/messages", "ok",
			button(map[string]any{"type": 2, "style": 1, "label": "x"}), 400, 50035, "components"},
		{"unknown route", "GET", "/nothing", "ok", nil, 404, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			auth := tt.auth
			if auth == "ok" {
				auth = "Bot " + srv.Token()
			}
			a := call(t, srv, tt.method, tt.path, auth, tt.body)
			if a.Status != tt.status || a.code() != tt.code || a.Body["message"] == nil {
				t.Fatalf("answer %d %s, want %d with code %d", a.Status, a.Raw, tt.status, tt.code)
			}
			if tt.field != "" {
				errs, _ := a.Body["errors"].(map[string]any)
				if _, ok := errs[tt.field]; !ok {
					t.Errorf("errors %v do not name %s", a.Body["errors"], tt.field)
				}
			}
		})
	}
	if n := len(srv.Messages(discordtest.ChannelGeneral)); n != 0 {
		t.Errorf("the fake holds %d messages after refusals", n)
	}
}

func TestEditMessage(t *testing.T) {
	srv := discordtest.NewServer(t)
	srv.SetRateLimit(100, time.Minute)
	bot := "Bot " + srv.Token()
	prompt := func(t *testing.T) string {
		t.Helper()
		a := post(t, srv, discordtest.ChannelGeneral, map[string]any{"content": "may I?", "flags": 4,
			"components": []any{map[string]any{"type": 1, "components": []any{
				map[string]any{"type": 2, "style": 3, "label": "Allow", "custom_id": "perm:allow:abcde"},
				map[string]any{"type": 2, "style": 4, "label": "Deny", "custom_id": "perm:deny:abcde"},
			}}}})
		if a.Status != 200 {
			t.Fatalf("post: %d %s", a.Status, a.Raw)
		}
		id, _ := a.Body["id"].(string)
		return id
	}
	edit := func(t *testing.T, channel, id string, body any) answer {
		t.Helper()
		return call(t, srv, "PATCH", "/channels/"+channel+"/messages/"+id, bot, body)
	}

	t.Run("content replaced, empty components remove the buttons", func(t *testing.T) {
		id := prompt(t)
		a := edit(t, discordtest.ChannelGeneral, id, map[string]any{"content": "allowed", "components": []any{}})
		if a.Status != 200 || a.Body["id"] != id || a.Body["content"] != "allowed" || a.Body["edited_timestamp"] == nil || a.Header.Get("X-RateLimit-Bucket") == "" {
			t.Fatalf("answer %d %s, want 200 with the edited message", a.Status, a.Raw)
		}
		if cs, ok := a.Body["components"].([]any); !ok || len(cs) != 0 {
			t.Errorf("answer's components %v, want []", a.Body["components"])
		}
		m, _ := srv.Message(discordtest.ChannelGeneral, id)
		if m.Content != "allowed" || len(m.Components) != 0 || m.EditedTimestamp == nil || m.Flags != 4 {
			t.Errorf("message %+v, want the new content, no components, edited, flags kept", m)
		}
		c := srv.Calls(discordtest.RouteEditMessage)
		if last := c[len(c)-1]; !last.OK() || last.Message != id || last.Channel != discordtest.ChannelGeneral ||
			last.Edit == nil || last.Edit.Content == nil || *last.Edit.Content != "allowed" || last.Edit.Components == nil || len(*last.Edit.Components) != 0 {
			t.Errorf("call %+v, edit %+v", last, last.Edit)
		}
	})

	t.Run("fields left out are kept", func(t *testing.T) {
		id := prompt(t)
		if a := edit(t, discordtest.ChannelGeneral, id, map[string]any{"content": "still open"}); a.Status != 200 {
			t.Fatalf("answer %d %s", a.Status, a.Raw)
		}
		if m, _ := srv.Message(discordtest.ChannelGeneral, id); m.Content != "still open" || len(m.Components) != 1 || len(m.Components[0].Components) != 2 {
			t.Errorf("message %+v, want the new content over the buttons kept", m)
		}
		if a := edit(t, discordtest.ChannelGeneral, id, map[string]any{"components": nil}); a.Status != 200 {
			t.Fatalf("answer %d %s", a.Status, a.Raw)
		}
		if m, _ := srv.Message(discordtest.ChannelGeneral, id); m.Content != "still open" || len(m.Components) != 0 {
			t.Errorf("message %+v, want null components cleared and the content kept", m)
		}
	})

	t.Run("refusals", func(t *testing.T) {
		id := prompt(t)
		person := srv.UserMessage(discordtest.MessageOptions{Content: "mine"})
		tests := []struct {
			name         string
			channel, id  string
			body         any
			status, code int
		}{
			{"unknown message", discordtest.ChannelGeneral, "1100000000000000999", map[string]any{"content": "x"}, 404, 10008},
			{"message of another channel", discordtest.ChannelDefault, id, map[string]any{"content": "x"}, 404, 10008},
			{"unknown channel", "1", id, map[string]any{"content": "x"}, 404, 10003},
			{"a person's message", person.ChannelID, person.ID, map[string]any{"content": "x"}, 403, 50005},
			{"too long", discordtest.ChannelGeneral, id, map[string]any{"content": strings.Repeat("é", 2001)}, 400, 50035},
			{"nothing left", discordtest.ChannelGeneral, id, map[string]any{"content": "", "components": []any{}}, 400, 50006},
			{"a button without custom_id", discordtest.ChannelGeneral, id, map[string]any{"components": []any{
				map[string]any{"type": 1, "components": []any{map[string]any{"type": 2, "style": 1, "label": "x"}}}}}, 400, 50035},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				if a := edit(t, tt.channel, tt.id, tt.body); a.Status != tt.status || a.code() != tt.code || a.Body["message"] == nil {
					t.Errorf("answer %d %s, want %d with code %d", a.Status, a.Raw, tt.status, tt.code)
				}
			})
		}
		if m, _ := srv.Message(discordtest.ChannelGeneral, id); m.Content != "may I?" || m.EditedTimestamp != nil || len(m.Components) != 1 {
			t.Errorf("prompt %+v after refused edits, want it unchanged", m)
		}
		if m, _ := srv.Message(person.ChannelID, person.ID); m.Content != "mine" {
			t.Errorf("the person's message %+v, want it unchanged", m)
		}
	})
}

func TestReactions(t *testing.T) {
	srv := discordtest.NewServer(t)
	m := srv.UserMessage(discordtest.MessageOptions{Content: "x"})
	path := func(emoji string) string {
		return "/channels/" + m.ChannelID + "/messages/" + m.ID + "/reactions/" + url.PathEscape(emoji) + "/@me"
	}
	for range 2 {
		if a := call(t, srv, "PUT", path("👍"), "Bot "+srv.Token(), nil); a.Status != 204 {
			t.Fatalf("react: %d %s", a.Status, a.Raw)
		}
	}
	got, _ := srv.Message(m.ChannelID, m.ID)
	if len(got.Reactions) != 1 || got.Reactions[0].Count != 1 || !got.Reactions[0].Me {
		t.Errorf("reactions %+v, want one of the bot's", got.Reactions)
	}
	if a := call(t, srv, "PUT", path("thumbsup"), "Bot "+srv.Token(), nil); a.Status != 400 || a.code() != 10014 {
		t.Errorf("a name for an emoji: %d %s, want 10014", a.Status, a.Raw)
	}
	if a := call(t, srv, "PUT", "/channels/"+m.ChannelID+"/messages/1/reactions/"+url.PathEscape("👍")+"/@me", "Bot "+srv.Token(), nil); a.Status != 404 || a.code() != 10008 {
		t.Errorf("an unknown message: %d %s, want 10008", a.Status, a.Raw)
	}
}

func TestDirectMessagesAndThreads(t *testing.T) {
	srv := discordtest.NewServer(t)
	a := call(t, srv, "POST", "/users/@me/channels", "Bot "+srv.Token(), map[string]any{"recipient_id": discordtest.HumanID})
	again := call(t, srv, "POST", "/users/@me/channels", "Bot "+srv.Token(), map[string]any{"recipient_id": discordtest.HumanID})
	if a.Status != 200 || a.Body["type"] != float64(discordtest.TypeDM) || a.Body["id"] != again.Body["id"] || srv.DMChannel(discordtest.HumanID) != a.Body["id"] {
		t.Errorf("direct message %s, again %s", a.Raw, again.Raw)
	}
	if b := call(t, srv, "POST", "/users/@me/channels", "Bot "+srv.Token(), map[string]any{"recipient_id": "1"}); b.Status != 400 || b.code() != 50033 {
		t.Errorf("unknown user: %d %s", b.Status, b.Raw)
	}
	m := srv.UserMessage(discordtest.MessageOptions{Content: "root"})
	th := call(t, srv, "POST", "/channels/"+m.ChannelID+"/messages/"+m.ID+"/threads", "Bot "+srv.Token(), map[string]any{"name": "talk"})
	if th.Status != 201 || th.Body["id"] != m.ID || th.Body["parent_id"] != m.ChannelID || th.Body["type"] != float64(discordtest.TypePublicThread) {
		t.Errorf("thread %d %s", th.Status, th.Raw)
	}
	if dup := call(t, srv, "POST", "/channels/"+m.ChannelID+"/messages/"+m.ID+"/threads", "Bot "+srv.Token(), map[string]any{"name": "talk"}); dup.code() != 160004 {
		t.Errorf("second thread: %d %s, want 160004", dup.Status, dup.Raw)
	}
	if ch := call(t, srv, "GET", "/channels/"+m.ID, "Bot "+srv.Token(), nil); ch.Body["type"] != float64(discordtest.TypePublicThread) {
		t.Errorf("GET the thread: %s", ch.Raw)
	}
	if p := post(t, srv, m.ID, map[string]any{"content": "in the thread"}); p.Status != 200 || p.Body["position"] == nil {
		t.Errorf("post in the thread: %d %s", p.Status, p.Raw)
	}
}

func TestRateLimits(t *testing.T) {
	srv := discordtest.NewServer(t)
	srv.SetRateLimit(2, time.Minute)
	for i := range 2 {
		if a := post(t, srv, discordtest.ChannelGeneral, map[string]any{"content": "x"}); a.Status != 200 || a.Header.Get("X-RateLimit-Remaining") != []string{"1", "0"}[i] {
			t.Fatalf("post %d: %d, remaining %q", i, a.Status, a.Header.Get("X-RateLimit-Remaining"))
		}
	}
	a := post(t, srv, discordtest.ChannelGeneral, map[string]any{"content": "x"})
	if a.Status != 429 || a.Body["retry_after"] == nil || a.Body["global"] != false || a.Header.Get("Retry-After") == "" || a.Header.Get("X-RateLimit-Scope") != "user" {
		t.Errorf("past the limit: %d %s %v", a.Status, a.Raw, a.Header)
	}
	// Another channel is another bucket.
	if b := post(t, srv, discordtest.ChannelDefault, map[string]any{"content": "x"}); b.Status != 200 {
		t.Errorf("another channel: %d", b.Status)
	}
	srv.RateLimitNext(discordtest.RouteCreateMessage, 1, 1500*time.Millisecond, true)
	g := post(t, srv, discordtest.ChannelDefault, map[string]any{"content": "x"})
	if g.Status != 429 || g.Body["retry_after"] != 1.5 || g.Body["global"] != true || g.Header.Get("Retry-After") != "2" || g.Header.Get("X-RateLimit-Global") != "true" {
		t.Errorf("injected global limit: %d %s %v", g.Status, g.Raw, g.Header)
	}
}

func TestInjectedFaults(t *testing.T) {
	srv := discordtest.NewServer(t)
	srv.FailHTTPNext(discordtest.RouteCreateMessage, 1, 502)
	if a := post(t, srv, discordtest.ChannelGeneral, map[string]any{"content": "x"}); a.Status != 502 || !strings.Contains(a.Raw, "cloudflare") {
		t.Errorf("502: %d %s", a.Status, a.Raw)
	}
	srv.FailChannel(discordtest.ChannelGeneral, 403, 50001, "Missing Access")
	if a := post(t, srv, discordtest.ChannelGeneral, map[string]any{"content": "x"}); a.Status != 403 || a.code() != 50001 {
		t.Errorf("channel fault: %d %s", a.Status, a.Raw)
	}
	srv.FailChannel(discordtest.ChannelGeneral, 0, 0, "")
	srv.HangUpNext(discordtest.RouteCreateMessage, 1)
	req, _ := http.NewRequestWithContext(t.Context(), "POST", srv.URL()+"/channels/"+discordtest.ChannelGeneral+"/messages", strings.NewReader(`{"content":"x"}`))
	req.Header.Set("Authorization", "Bot "+srv.Token())
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Errorf("a hang-up answered %d", resp.StatusCode)
	}
	calls := srv.Calls(discordtest.RouteCreateMessage)
	if last := calls[len(calls)-1]; !last.HungUp || !last.OK() || len(srv.Messages(discordtest.ChannelGeneral)) != 1 {
		t.Errorf("the hung-up call %+v: want it carried out", last)
	}
}

func TestInteractionCallback(t *testing.T) {
	srv := discordtest.NewServer(t)
	m := srv.UserMessage(discordtest.MessageOptions{Content: "x"})
	id := srv.Press(m.ChannelID, m.ID, "perm:allow:abcde", discordtest.HumanID)
	if a := call(t, srv, "POST", "/interactions/"+id+"/wrong/callback", "", map[string]any{"type": 6}); a.code() != 10062 {
		t.Errorf("wrong token: %d %s", a.Status, a.Raw)
	}
	if srv.Acknowledged(id) {
		t.Fatal("acknowledged with a wrong token")
	}
}

// gateway is a raw client of the fake's gateway.
type gateway struct {
	t  *testing.T
	ws *websocket.Conn
}

func dial(t *testing.T, url string) *gateway {
	t.Helper()
	ws, _, err := websocket.Dial(t.Context(), url, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ws.CloseNow() })
	return &gateway{t: t, ws: ws}
}

type payload struct {
	Op int             `json:"op"`
	D  json.RawMessage `json:"d"`
	S  *int64          `json:"s"`
	T  *string         `json:"t"`
}

func (g *gateway) read() (payload, error) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	_, b, err := g.ws.Read(ctx)
	var p payload
	if err == nil {
		err = json.Unmarshal(b, &p)
	}
	return p, err
}

func (g *gateway) must() payload {
	g.t.Helper()
	p, err := g.read()
	if err != nil {
		g.t.Fatal(err)
	}
	return p
}

// next reads until a dispatch of event t.
func (g *gateway) next(name string) payload {
	g.t.Helper()
	for {
		p := g.must()
		if p.Op == discordtest.OpDispatch && p.T != nil && *p.T == name {
			return p
		}
	}
}

func (g *gateway) send(op int, d any) {
	g.t.Helper()
	b, _ := json.Marshal(map[string]any{"op": op, "d": d})
	if err := g.ws.Write(context.Background(), websocket.MessageText, b); err != nil {
		g.t.Fatal(err)
	}
}

// closed reads until the connection ends and returns its close code.
func (g *gateway) closed() websocket.StatusCode {
	g.t.Helper()
	for {
		if _, err := g.read(); err != nil {
			return websocket.CloseStatus(err)
		}
	}
}

const intents = 1<<0 | 1<<9 | 1<<12 | 1<<15

func identify(token string, intents int) map[string]any {
	return map[string]any{"token": token, "intents": intents, "properties": map[string]string{"os": "linux", "browser": "test", "device": "test"}}
}

func TestGatewaySession(t *testing.T) {
	srv := discordtest.NewServer(t)
	g := dial(t, srv.GatewayURL()+"?v=10&encoding=json")
	hello := g.must()
	var h struct {
		HeartbeatInterval int64 `json:"heartbeat_interval"`
	}
	_ = json.Unmarshal(hello.D, &h)
	if hello.Op != discordtest.OpHello || h.HeartbeatInterval != discordtest.DefaultHeartbeatInterval.Milliseconds() {
		t.Fatalf("hello %+v", hello)
	}
	g.send(discordtest.OpHeartbeat, nil)
	if p := g.must(); p.Op != discordtest.OpHeartbeatACK {
		t.Fatalf("heartbeat answered %+v", p)
	}
	g.send(discordtest.OpIdentify, identify(srv.Token(), intents))
	ready := g.next("READY")
	var r struct {
		SessionID        string `json:"session_id"`
		ResumeGatewayURL string `json:"resume_gateway_url"`
		User             struct {
			ID string `json:"id"`
		} `json:"user"`
	}
	_ = json.Unmarshal(ready.D, &r)
	if r.SessionID == "" || r.ResumeGatewayURL != srv.ResumeURL() || r.User.ID != discordtest.BotID || ready.S == nil || *ready.S != 1 {
		t.Fatalf("READY %s (s %v)", ready.D, ready.S)
	}
	g.next("GUILD_CREATE")
	m := srv.UserMessage(discordtest.MessageOptions{Content: "hi"})
	ev := g.next("MESSAGE_CREATE")
	var got struct {
		ID      string `json:"id"`
		GuildID string `json:"guild_id"`
		Content string `json:"content"`
		Member  any    `json:"member"`
	}
	_ = json.Unmarshal(ev.D, &got)
	if got.ID != m.ID || got.GuildID != discordtest.GuildID || got.Content != "hi" || got.Member == nil {
		t.Errorf("MESSAGE_CREATE %s", ev.D)
	}

	// Dropped, the session is resumed at resume_gateway_url, and what was
	// sent meanwhile is replayed before RESUMED.
	seq := *ev.S
	_ = g.ws.CloseNow()
	srv.UserMessage(discordtest.MessageOptions{Content: "missed"})
	g2 := dial(t, r.ResumeGatewayURL+"?v=10&encoding=json")
	g2.must()
	g2.send(discordtest.OpResume, map[string]any{"token": srv.Token(), "session_id": r.SessionID, "seq": seq})
	replay := g2.must()
	if replay.T == nil || *replay.T != "MESSAGE_CREATE" || !strings.Contains(string(replay.D), "missed") || *replay.S != seq+1 {
		t.Fatalf("replayed %+v %s", replay, replay.D)
	}
	g2.next("RESUMED")

	// An unknown session is an Invalid Session that cannot be resumed.
	g3 := dial(t, srv.GatewayURL()+"?v=10&encoding=json")
	g3.must()
	g3.send(discordtest.OpResume, map[string]any{"token": srv.Token(), "session_id": "nope", "seq": 1})
	if p := g3.must(); p.Op != discordtest.OpInvalidSession || string(p.D) != "false" {
		t.Errorf("resume of an unknown session: %+v %s", p, p.D)
	}
}

func TestGatewayCloseCodes(t *testing.T) {
	srv := discordtest.NewServer(t)
	tests := []struct {
		name  string
		query string
		setup func()
		send  func(g *gateway)
		code  websocket.StatusCode
	}{
		{"wrong token", "?v=10&encoding=json", nil, func(g *gateway) { g.send(discordtest.OpIdentify, identify("nope", intents)) }, 4004},
		{"old API version", "?v=9&encoding=json", nil, nil, 4012},
		{"payload before identify", "?v=10&encoding=json", nil, func(g *gateway) { g.send(discordtest.OpRequestMembers, map[string]any{}) }, 4003},
		{"unknown opcode", "?v=10&encoding=json", nil, func(g *gateway) { g.send(42, nil) }, 4001},
		{"invalid intents", "?v=10&encoding=json", nil, func(g *gateway) { g.send(discordtest.OpIdentify, identify(srv.Token(), 1<<30)) }, 4013},
		{"disallowed intent", "?v=10&encoding=json", func() { srv.AllowMessageContent(false) }, func(g *gateway) {
			g.send(discordtest.OpIdentify, identify(srv.Token(), intents))
		}, 4014},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.setup != nil {
				tt.setup()
			}
			g := dial(t, srv.GatewayURL()+tt.query)
			if tt.send != nil {
				if p := g.must(); p.Op != discordtest.OpHello {
					t.Fatalf("first payload %+v", p)
				}
				tt.send(g)
			}
			if code := g.closed(); code != tt.code {
				t.Errorf("closed with %d, want %d", code, tt.code)
			}
		})
	}
}

func TestMessageContentNeedsTheIntent(t *testing.T) {
	srv := discordtest.NewServer(t)
	g := dial(t, srv.GatewayURL()+"?v=10&encoding=json")
	g.must()
	g.send(discordtest.OpIdentify, identify(srv.Token(), 1<<0|1<<9))
	g.next("READY")
	srv.UserMessage(discordtest.MessageOptions{Content: "secret"})
	if ev := g.next("MESSAGE_CREATE"); strings.Contains(string(ev.D), "secret") {
		t.Errorf("MESSAGE_CREATE without MESSAGE_CONTENT carries the text: %s", ev.D)
	}
	srv.UserMessage(discordtest.MessageOptions{Content: "<@" + discordtest.BotID + "> mentioned"})
	if ev := g.next("MESSAGE_CREATE"); !strings.Contains(string(ev.D), "mentioned") {
		t.Errorf("a message mentioning the bot lost its text: %s", ev.D)
	}
}
