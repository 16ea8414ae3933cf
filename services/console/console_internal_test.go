package console

import (
	"bytes"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/obs"
)

// TestAssembleReplicas: two messengers (one receives, one stands by), a
// butler in its container and in herald run: one line per integration
// with the running receiver and the latest times, a receiver in conflict
// as CANNOT WORK, the butler's sessions summed, herald run's process
// marked as the runner; printed as herald status prints it.
func TestAssembleReplicas(t *testing.T) {
	at := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	started := at.Add(-90 * time.Minute)
	proc := func(service, host string, pid int, ready bool) obs.ProcessStatus {
		p := obs.ProcessStatus{Service: service, Instance: host, Version: "0.1.0", Host: host, PID: pid, Started: started, Ready: ready}
		if !ready {
			p.NotReady = map[string]string{"messenger": "receivers not running: slack:team: another app holds the socket"}
		}
		return p
	}
	answers := []answer{
		{Process: proc(obs.ServiceButler("assistant"), "b1", 7, true), Butler: "assistant", Sessions: 1, Listening: 1, Runner: &runnerState{Unavailable: "run.command claude is not found"}},
		{Process: proc(obs.ServiceMessenger, "m2", 9, true), Integrations: []string{"telegram:tg"},
			Receivers:    []receiverState{{Integration: "tg", Channel: "telegram", State: "standby"}},
			LastOutbound: map[string]time.Time{"telegram:tg": at.Add(-time.Minute)}},
		{Process: proc(obs.ServiceSwitchboard, "s1", 5, true), Integrations: []string{"telegram:tg", "slack:team", "email:mail"}, Held: 2, OpenPrompts: 1,
			Consumers: []obs.ConsumerState{{Stream: "HERALD_ROUTE", Pending: 3}}},
		{Process: proc(obs.ServiceMessenger, "m1", 8, false), Integrations: []string{"telegram:tg", "slack:team"}, Unavailable: map[string]string{"mail": "environment variable SMTP_PASSWORD is not set"},
			Receivers: []receiverState{{Integration: "tg", Channel: "telegram", State: "running", LastInbound: at.Add(-2 * time.Minute)},
				{Integration: "team", Channel: "slack", State: "conflict", Detail: "another app holds the socket"}},
			LastOutbound: map[string]time.Time{"telegram:tg": at.Add(-10 * time.Second)}},
		{Process: proc(obs.ServiceButler("assistant"), "laptop", 4242, true), Butler: "assistant", Sessions: 2, Listening: 0, Runner: &runnerState{Runs: 1, Working: 1}},
	}
	f := &Fleet{At: at, NATS: "nats://nats:4222"}
	f.assemble(answers)
	var out bytes.Buffer
	if err := f.Text(&out); err != nil {
		t.Fatal(err)
	}
	want := `Herald fleet on nats://nats:4222 at ` + at.Local().Format(time.DateTime) + `

PROCESS                    HOST    PID   VERSION  UP     READY
switchboard                s1      5     0.1.0    1h30m  ready
messenger                  m1      8     0.1.0    1h30m  NOT READY: messenger: receivers not running: slack:team: another app holds the socket
messenger                  m2      9     0.1.0    1h30m  ready
butler assistant           b1      7     0.1.0    1h30m  ready
butler assistant (runner)  laptop  4242  0.1.0    1h30m  ready

INTEGRATION  RECEIVER  LAST IN  LAST OUT  
email:mail   -         -        -         CANNOT WORK: environment variable SMTP_PASSWORD is not set
slack:team   conflict  -        -         CANNOT WORK: its receiver is in conflict: another app holds the socket
telegram:tg  running   2m ago   10s ago   

QUEUE                 WAITING  
routes to route       3        
deliveries in flight  0        
dead letters          0        
held for quiet hours  2        
open prompts          1        (waiting for an approver)
open questions        0        

BUTLER     SESSIONS  LISTENING  INBOX  UNREAD  RUNNER
assistant  3         1          0      0       1 run, 1 working
`
	if got := out.String(); got != want {
		t.Errorf("herald status printed:\n%s\nwant:\n%s", got, want)
	}
	if f.Ready() {
		t.Error("a fleet with a messenger not ready and integrations that cannot work is Ready")
	}
}
