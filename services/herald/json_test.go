package herald_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"

	"github.com/heraldhq/herald/pkg/approval"
	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/bus/bustest"
	"github.com/heraldhq/herald/pkg/token"
	"github.com/heraldhq/herald/services/switchboard/pairing"
)

// rfc3339 is t as every --json list writes it: RFC 3339 in UTC.
func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// TestListsAsJSON: herald pair list, dead ls, token ls and grants ls take
// --json and print one JSON object per item, snake_case keys, times in
// UTC, nothing else; an empty list prints nothing and exits 0.
func TestListsAsJSON(t *testing.T) {
	srv := bustest.RunServer(t)
	_, js := srv.Connect()
	env := map[string]string{"NATS_URL": srv.URL()}
	lists := [][]string{{"pair", "list", "--json"}, {"pair", "ls", "--json"}, {"dead", "ls", "--json"}, {"token", "ls", "--json"}, {"grants", "ls", "--json"}}
	for _, args := range lists {
		if code, stdout, stderr := run(t, env, args...); code != 0 || stdout != "" || stderr != "" {
			t.Errorf("herald %v with nothing to list: exit %d, stdout %q, stderr %q; want exit 0 and nothing", args, code, stdout, stderr)
		}
	}

	pairs, err := pairing.Open(t.Context(), js)
	if err != nil {
		t.Fatal(err)
	}
	asked, err := pairs.Request(t.Context(), "tg_main", "4242", "ada_l", "4242", "m1")
	if err != nil {
		t.Fatal(err)
	}
	let, err := pairs.Request(t.Context(), "tg_main", "5151", "", "5151", "m2")
	if err != nil {
		t.Fatal(err)
	}
	paired, err := pairs.Approve(t.Context(), let.Code)
	if err != nil {
		t.Fatal(err)
	}

	h := nats.Header{}
	h.Set(bus.HeaderSubject, bus.DeliverSubject("log.log"))
	h.Set(bus.HeaderError, "target_unavailable: log: disk full")
	h.Set(bus.HeaderErrorClass, "target_unavailable")
	h.Set(bus.HeaderDeliveries, "3")
	h.Set(bus.HeaderKey, "k1")
	if _, err := js.PublishMsg(t.Context(), &nats.Msg{Subject: bus.DeadSubject(bus.StreamDeliver, bus.DeliverSubject("log.log")), Header: h, Data: []byte(`{"request_context":{"request_id":"r1"}}`)}); err != nil {
		t.Fatal(err)
	}
	dead, err := bus.DeadLetters(t.Context(), js)
	if err != nil || len(dead) != 1 {
		t.Fatalf("dead letters: %v, %v", dead, err)
	}

	tokens, err := token.Open(t.Context(), js)
	if err != nil {
		t.Fatal(err)
	}
	_, rec, err := tokens.Mint(t.Context(), "assistant", 0)
	if err != nil {
		t.Fatal(err)
	}

	approvals, err := approval.Open(t.Context(), js)
	if err != nil {
		t.Fatal(err)
	}
	paris := time.FixedZone("CEST", 2*60*60)
	grant := &approval.Grant{Butler: "assistant", Session: "s-1", ToolName: "Bash", GrantedBy: "4242", Channel: "telegram:tg_main", Prompt: "Bash: ls",
		CreatedAt: time.Date(2031, 5, 4, 12, 0, 0, 0, paris), ExpiresAt: time.Date(2031, 5, 4, 20, 0, 0, 0, paris)}
	if err := approvals.AddGrant(t.Context(), grant); err != nil {
		t.Fatal(err)
	}

	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"pair", "list", "--json"}, fmt.Sprintf(`{"state":"pending","code":%q,"integration":"tg_main","sender":"4242","name":"ada_l","chat_id":"4242","created":%q,"expires":%q}
{"state":"paired","code":%q,"integration":"tg_main","sender":"5151","chat_id":"5151","paired":%q}
`, asked.Code, rfc3339(asked.Created), rfc3339(asked.Expires), let.Code, rfc3339(paired.Paired))},
		{[]string{"dead", "ls", "--json"}, fmt.Sprintf(`{"id":1,"time":%q,"stream":"HERALD_DELIVER","subject":"herald.deliver.log.log","request_id":"r1","idempotency_key":"k1","tries":3,"class":"target_unavailable","error":"target_unavailable: log: disk full"}
`, rfc3339(dead[0].Time))},
		{[]string{"token", "ls", "--json"}, fmt.Sprintf(`{"id":%q,"butler":"assistant","created":%q,"expired":false}
`, rec.ID, rfc3339(rec.Created))},
		{[]string{"grants", "ls", "--json"}, fmt.Sprintf(`{"id":%q,"butler":"assistant","tool":"Bash","session":"s-1","granted_by":"4242","channel":"telegram:tg_main","created":"2031-05-04T10:00:00Z","expires":"2031-05-04T18:00:00Z"}
`, grant.ID)},
	} {
		code, stdout, stderr := run(t, env, tt.args...)
		if diff := cmp.Diff(tt.want, stdout); diff != "" || code != 0 || stderr != "" {
			t.Errorf("herald %v: exit %d, stderr %q; stdout (-want +got):\n%s", tt.args, code, stderr, diff)
		}
	}
}
