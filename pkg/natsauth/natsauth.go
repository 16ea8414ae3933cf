// Package natsauth derives the NATS server authorization of a Herald fleet
// from its herald.yaml: one user per service and per butler, each allowed
// only the subjects its job needs, each rule with why (`herald nats-auth`
// prints it; deploy/nats-secure.conf is its output for the compose fleet).
//
//   - Users, Butler, Discovery: the users and their rules (User, Rule).
//   - Render: the account and its users, for a nats-server configuration.
//   - ConnSwitchboard, ConnMessenger, ConnButler, ...: connection names,
//     and so inbox prefixes; PasswordEnv, where a user's password is read.
//
// NATS checks subjects, never bodies, so each rule assumes the worst body.
// What each user may do, and why, is in docs/security.md, "The doors and
// their locks".
package natsauth

import (
	"fmt"
	"strings"

	"github.com/heraldhq/herald/pkg/approval"
	"github.com/heraldhq/herald/pkg/audit"
	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/forum"
	"github.com/heraldhq/herald/pkg/obs"
	"github.com/heraldhq/herald/pkg/reload"
)

// Rule is one allowed subject, with why.
type Rule struct {
	Subject string
	Why     string
}

// User is one NATS user of the fleet.
type User struct {
	Name string
	// PasswordEnv names the environment variable the server reads the
	// password from; the file never holds one.
	PasswordEnv    string
	About          string
	Publish        []Rule
	Subscribe      []Rule
	AllowResponses bool
	// ResponsesWhy says why it may answer on a reply subject.
	ResponsesWhy string
}

// Connection names (and so inbox prefixes, _INBOX.<name>) of the fleet's
// processes; bus.Connect sets them.
const (
	ConnSwitchboard = "switchboard"
	ConnMessenger   = "messenger"
	ConnCLI         = "herald-cli"
)

// ConnButler is the connection name of butler name.
func ConnButler(name string) string { return "butler." + name }

// PasswordEnv is the variable holding user's password.
func PasswordEnv(user string) string {
	return "HERALD_NATS_" + strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(user)) + "_PASSWORD"
}

func rules(why string, subjects ...string) []Rule {
	out := make([]Rule, len(subjects))
	for i, s := range subjects {
		out[i] = Rule{Subject: s, Why: why}
		why = ""
	}
	return out
}

// Discovery is what a process needs to answer as the NATS micro service
// service: $SRV.PING, INFO and STATS (for all services, for its name, and
// for its instance id) and its status endpoint (obs.AddService).
func Discovery(service string) []Rule {
	var out []Rule
	for _, verb := range []string{"PING", "INFO", "STATS"} {
		out = append(out, rules("", "$SRV."+verb, "$SRV."+verb+"."+service, "$SRV."+verb+"."+service+".*")...)
	}
	out = append(out, Rule{Subject: obs.StatusSubject(service)})
	out[0].Why = "discovery as the micro service " + service + " ($SRV.PING, INFO, STATS; its status endpoint)"
	return out
}

// answersDiscovery is the reason a service user may answer on reply subjects.
const answersDiscovery = "Answers discovery and status requests on the asker's reply subject, once each."

// reloads are `herald reload`'s requests, which every process answers.
var reloads = rules("herald reload: checks and applies the changed herald.yaml when the operator asks", reload.CheckSubject, reload.ApplySubject)

// reloadAnswers is where the process connected as conn answers them: on
// subjects naming conn, which no other user may publish, so no process can
// answer in another's name (NATS tells the asker nothing of who published).
func reloadAnswers(conn string) []Rule {
	return rules("herald reload: its answers, on subjects that name it (no other user may answer as it)", reload.AnswerSubjects(conn))
}

// durable is what a worker needs of its own durable consumer: to bind it
// and take from it (herald setup makes it).
func durable(stream, name string) []Rule {
	return rules("its durable consumer "+name+" on "+stream+" (herald setup makes it)",
		"$JS.API.CONSUMER.INFO."+stream+"."+name,
		"$JS.API.CONSUMER.MSG.NEXT."+stream+"."+name,
		"$JS.ACK."+stream+"."+name+".>")
}

// bucket is full use of a bucket: bind it, read, write, watch.
func bucket(name, why string) []Rule {
	return rules(why,
		"$JS.API.STREAM.INFO.KV_"+name,
		"$KV."+name+".>",
		"$JS.API.DIRECT.GET.KV_"+name+".>",
		"$JS.API.CONSUMER.CREATE.KV_"+name+".>",
		"$JS.API.CONSUMER.DELETE.KV_"+name+".*",
		"$JS.FC.KV_"+name+".>")
}

// probe lets a process write its own probe record (obs.StoreWatch) and
// nothing else of herald_probe.
func probe(key string) []Rule {
	return rules("readiness: its probe record, whether NATS can store (write only)", bus.ProbeSubject(key))
}

// streamInfo lets a service check the streams it uses.
func streamInfo(streams ...string) []Rule {
	var out []Rule
	for _, s := range streams {
		out = append(out, Rule{Subject: "$JS.API.STREAM.INFO." + s})
	}
	out[0].Why = "checks the streams it uses exist (herald setup makes them)"
	return out
}

// Users are the fleet's NATS users for cfg.
func Users(cfg *config.Config) []User {
	users := []User{switchboardUser(), messengerUser()}
	for _, b := range cfg.Butlers {
		users = append(users, Butler(b.Name, grantedTo(cfg, b.Name)...))
	}
	users = append(users, operatorUser(), setupUser())
	for i := range users {
		users[i].PasswordEnv = PasswordEnv(users[i].Name)
	}
	return users
}

// switchboardUser is the switchboard's user: it routes, gates and audits, so
// it publishes to every butler's inbox and reply subjects and to the
// messenger, and uses the buckets its routing keeps.
func switchboardUser() User {
	sb := User{Name: "switchboard", About: "routes, gates, threads, audits; answers butlers"}
	sb.Publish = concat(
		rules("routed notifies and pairing codes, to the messenger", "herald.deliver.>"),
		rules("answers to the waiting butlers", "herald.reply.>"),
		rules("inbound messages, verdicts and delivery notices, to each butler", "herald.inbox.>"),
		rules("the audit log and what it gives up on", "herald.audit.>", "herald.dead.>"),
		rules("", "$JS.API.INFO"),
		streamInfo(bus.StreamRoute, bus.StreamDeliver, bus.StreamResult, bus.StreamIngress, bus.StreamInbox, bus.StreamAudit, bus.StreamDeadLetter),
		durable(bus.StreamRoute, bus.ConsumerSwitchboard),
		durable(bus.StreamResult, bus.ConsumerResults),
		durable(bus.StreamIngress, bus.ConsumerIngress),
		bucket(bus.BucketDeliveries, "reads the ledger to answer repeated routes"),
		bucket(bus.BucketSessions, "threads -> sessions"),
		bucket(bus.BucketPairing, "pairing codes and paired senders"),
		bucket(bus.BucketApprovals, "permission prompts: where each was sent, and the one answer"),
		bucket(bus.BucketRequests, "records the inbound messages it routes, so replies name only those"),
		rules("whose Telegram forum topic a message was written in (topics: per_butler), read only, key by key",
			"$JS.API.DIRECT.GET.KV_"+bus.BucketChannelState+".$KV."+bus.BucketChannelState+"."+forum.ThreadKeys),
		bucket(bus.BucketHeld, "notes held for quiet hours, and their digests"),
		probe(bus.ServiceProbeKey(ConnSwitchboard)),
		reloadAnswers(ConnSwitchboard),
	)
	sb.Subscribe = concat(rules("", "_INBOX."+ConnSwitchboard+".>"),
		rules("direct routes: a butler's notify routed at once, before it is stored in HERALD_ROUTE", bus.DirectPrefix+"*"),
		Discovery(obs.ServiceSwitchboard), reloads)
	sb.AllowResponses, sb.ResponsesWhy = true, answersDiscovery
	return sb
}

// messengerUser is the messenger's user: it holds the channels, so it owns
// the delivery ledger and the buckets its receivers keep, and the web chat's
// stream.
func messengerUser() User {
	m := User{Name: "messenger", About: "holds every channel credential; delivers and receives"}
	m.Publish = concat(
		rules("delivery outcomes and what people sent, to the switchboard", "herald.result.>", "herald.ingress.>"),
		rules("a delivery's outcome, to the butler waiting for it", "herald.reply.>"),
		rules("mail dropped on arrival, and what it gives up on", "herald.audit.>", "herald.dead.>"),
		rules("", "$JS.API.INFO"),
		streamInfo(bus.StreamDeliver, bus.StreamResult, bus.StreamIngress, bus.StreamAudit, bus.StreamDeadLetter),
		// HERALD_WEB's info is among the web chat's rules below.
		durable(bus.StreamDeliver, bus.ConsumerMessenger),
		bucket(bus.BucketDeliveries, "owns the delivery ledger"),
		bucket(bus.BucketLeases, "one Telegram poller per bot across replicas"),
		bucket(bus.BucketChannelState, "Telegram offsets and butlers' forum topics"),
		bucket(bus.BucketStatus, "receivers' health, for channel_status"),
		bucket(bus.BucketLimits, "providers' rate limits and 429 pauses, shared by replicas"),
		bucket(bus.BucketSeen, "inbound messages stored lately, so a replayed one is a duplicate"),
		rules("the inbound messages the switchboard routed, read only, key by key: where a butler's sign of life shows",
			"$JS.API.DIRECT.GET.KV_"+bus.BucketRequests+".$KV."+bus.BucketRequests+"."+bus.RoutedPrefix+">"),
		rules("the web chat's conversations: the stream HERALD_WEB (herald setup makes it)",
			"herald.web.>",
			"$JS.API.STREAM.INFO.HERALD_WEB",
			"$JS.API.STREAM.MSG.GET.HERALD_WEB",
			"$JS.API.DIRECT.GET.HERALD_WEB.>",
			"$JS.API.CONSUMER.CREATE.HERALD_WEB.>",
			"$JS.API.CONSUMER.INFO.HERALD_WEB.*",
			"$JS.API.CONSUMER.MSG.NEXT.HERALD_WEB.*",
			"$JS.API.CONSUMER.DELETE.HERALD_WEB.*",
			"$JS.FC.HERALD_WEB.>"),
		rules("the web chat's typing… to the replicas serving its page", bus.WebTypingPrefix+">"),
		rules("files to and from people (herald_files): reads butlers' files out, writes the attachments it fetches for them",
			"$JS.API.STREAM.INFO."+bus.StreamFiles,
			"$O."+bus.BucketFiles+".C.>",
			"$JS.API.DIRECT.GET."+bus.StreamFiles+".>"),
		probe(bus.ServiceProbeKey(ConnMessenger)),
		reloadAnswers(ConnMessenger),
	)
	m.Subscribe = concat(rules("", "_INBOX."+ConnMessenger+".>"),
		rules("the butlers' signs of life (typing…, ack_reaction)", bus.TypingPrefix+"*.*"),
		rules("the web chat's typing…, for the pages this replica serves", bus.WebTypingPrefix+">"),
		rules("butlers asking for an attachment of a message routed to them (it checks that it was)", bus.DownloadSubject("*")),
		Discovery(obs.ServiceMessenger), reloads)
	m.AllowResponses, m.ResponsesWhy = true, answersDiscovery
	return m
}

// grantedTo lists the IDs of cfg's enabled integrations granted to butler
// name, in cfg's order.
func grantedTo(cfg *config.Config, name string) []string {
	var granted []string
	for _, in := range cfg.Integrations {
		if !in.Disabled && in.Grants.Allows(name) {
			granted = append(granted, in.ID)
		}
	}
	return granted
}

// operatorUser is the user of the operator's herald commands (connection
// herald-cli) other than setup.
func operatorUser() User {
	op := User{Name: "operator", About: "the operator's herald pair, dead, log and token commands (connection herald-cli)"}
	op.Publish = concat(
		bucket(bus.BucketPairing, "herald pair: pending codes and paired senders"),
		bucket(bus.BucketTokens, "herald token mint / revoke"),
		bucket(bus.BucketApprovals, "herald grants ls / revoke: the sessions approvers allowed a tool"),
		rules("herald dead ls / replay: the dead-letter stream",
			"$JS.API.STREAM.INFO."+bus.StreamDeadLetter,
			"$JS.API.CONSUMER.CREATE."+bus.StreamDeadLetter+".>",
			"$JS.API.CONSUMER.MSG.NEXT."+bus.StreamDeadLetter+".*",
			"$JS.API.CONSUMER.DELETE."+bus.StreamDeadLetter+".*",
			"$JS.API.STREAM.MSG.GET."+bus.StreamDeadLetter,
			"$JS.API.DIRECT.GET."+bus.StreamDeadLetter+".>",
			"$JS.API.STREAM.MSG.DELETE."+bus.StreamDeadLetter),
		rules("herald log: reads the audit log through ordered consumers of its own (it may not publish to it)",
			"$JS.API.CONSUMER.CREATE."+bus.StreamAudit+".>",
			"$JS.API.CONSUMER.MSG.NEXT."+bus.StreamAudit+".*",
			"$JS.API.CONSUMER.INFO."+bus.StreamAudit+".*",
			"$JS.API.CONSUMER.DELETE."+bus.StreamAudit+".*"),
		rules("discovery: $SRV PING, INFO and STATS of every service, and their status endpoints (replies come to its inbox)",
			"$SRV.>", "herald.status.>"),
		rules("herald reload: asks every process to check, then apply, the changed herald.yaml", reload.CheckSubject, reload.ApplySubject),
		rules("a replay goes back where it was first published",
			"herald.route.>", "herald.deliver.>", "herald.result.>", "herald.ingress.>", "herald.inbox.>"),
	)
	op.Subscribe = concat(rules("", "_INBOX."+ConnCLI+".>"),
		rules("herald reload: the processes' answers, each on a subject naming who answered", reload.AllAnswers))
	return op
}

// setupUser is the user `herald setup` runs as, the only one allowed the
// whole JetStream API.
func setupUser() User {
	setup := User{Name: "setup", About: "herald setup: creates and repairs streams, buckets and consumers; nothing else runs as it"}
	setup.Publish = rules("the whole JetStream API", "$JS.API.>")
	setup.Subscribe = rules("", "_INBOX."+ConnCLI+".>")
	return setup
}

// Butler is the user of butler name: its own traffic and nothing else. It
// reads the health (herald_status) of the integrations it is granted only,
// so it learns nothing of another butler's channels, such as when someone
// last wrote there.
func Butler(name string, integrations ...string) User {
	u := User{Name: "butler-" + name, About: "butler " + name + ": its own traffic only", AllowResponses: true,
		ResponsesWhy: "Confirms each answer it took, so a caller that left is told by a notice instead; answers discovery and status requests."}
	own := func(b string) string { return "$JS.API.DIRECT.GET.KV_" + b + ".$KV." + b + "." + name + ".>" }
	u.Publish = concat(
		rules("notifies, replies, reactions and prompts, as itself", bus.RouteSubject(name), bus.DirectSubject(name)),
		rules("its own ledger records, read by subject (binding the bucket would list every key)", own(bus.BucketDeliveries)),
		rules("its inbox: the durable "+bus.ConsumerInbox(name)+", made by herald setup, filtered on its own subject",
			"$JS.API.CONSUMER.INFO."+bus.StreamInbox+"."+bus.ConsumerInbox(name),
			"$JS.API.CONSUMER.MSG.NEXT."+bus.StreamInbox+"."+bus.ConsumerInbox(name),
			"$JS.ACK."+bus.StreamInbox+"."+bus.ConsumerInbox(name)+".>"),
		rules("the inbound messages it was given, so reply and react answer only those",
			"$KV."+bus.BucketRequests+"."+name+".>", own(bus.BucketRequests)),
		rules("signs of life: a message reached one of its sessions, or the model answered it (the messenger shows typing, and checks the message was routed to it)",
			bus.TypingSubject(name, "*")),
		statusOf(integrations),
		rules("files: writes its own files out, asks for the attachments of its messages and reads those fetched for it, in herald_files",
			bus.FileOutSubject(name, ">"), bus.DownloadSubject(name),
			"$JS.API.DIRECT.GET."+bus.StreamFiles+"."+bus.FileInPrefix(name)+">"),
		rules("opens its own questions (write only) and reads them back (an ask call waiting for its answer), and marks its own prompts' sessions ended; it opens no prompt (the switchboard does, from the request relayed in a notify)",
			"$KV."+bus.BucketApprovals+"."+approval.QuestionKeys(name),
			"$KV."+bus.BucketApprovals+"."+approval.EndedKeys(name),
			"$JS.API.DIRECT.GET.KV_"+bus.BucketApprovals+".$KV."+bus.BucketApprovals+"."+approval.QuestionKeys(name)),
		rules("reads the grants of its own sessions (\"Allow for this session\"), and audits the requests it answers by one",
			"$JS.API.DIRECT.GET.KV_"+bus.BucketApprovals+".$KV."+bus.BucketApprovals+"._grant."+name+".>",
			bus.ButlerAuditSubject(audit.AutoAllowed, name)),
		rules("audits the runs of Claude Code it starts and ends (run:)",
			bus.ButlerAuditSubject(audit.RunStarted, name), bus.ButlerAuditSubject(audit.RunEnded, name)),
		rules("its own minted MCP tokens (hashes), read only", own(bus.BucketTokens)),
		rules("readiness: JetStream answers (account info: usage counts, no names)", "$JS.API.INFO"),
		probe(bus.ButlerProbeKey(name)),
		reloadAnswers(ConnButler(name)),
	)
	u.Subscribe = concat(rules("its answers, and replies to its requests", bus.ReplySubject(name, ">"), "_INBOX."+ConnButler(name)+".>"),
		Discovery(obs.ServiceButler(name)), reloads)
	return u
}

// statusOf lets a butler read the receivers' health (channel_status) of
// the integrations it is granted, key by key.
func statusOf(integrations []string) []Rule {
	var subjects []string
	for _, id := range integrations {
		subjects = append(subjects, "$JS.API.DIRECT.GET.KV_"+bus.BucketStatus+".$KV."+bus.BucketStatus+"."+id)
	}
	if len(subjects) == 0 {
		return nil
	}
	return rules("the receivers' health (channel_status) of its integrations, read only", subjects...)
}

func concat(parts ...[]Rule) []Rule {
	var out []Rule
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// Render is the NATS server configuration for cfg: the account HERALD with
// JetStream and the users, to be included after the server's own settings.
func Render(cfg *config.Config) []byte {
	var b strings.Builder
	b.WriteString(header)
	b.WriteString("include ./nats.conf\n\naccounts {\n  HERALD {\n    jetstream: enabled\n    users: [\n")
	for _, u := range Users(cfg) {
		fmt.Fprintf(&b, "      {\n        # %s\n        user: %q\n        password: $%s\n        permissions: {\n", u.About, u.Name, u.PasswordEnv)
		writeRules(&b, "publish", u.Publish)
		writeRules(&b, "subscribe", u.Subscribe)
		if u.AllowResponses {
			fmt.Fprintf(&b, "          # %s\n", u.ResponsesWhy)
			b.WriteString("          allow_responses: true\n")
		}
		b.WriteString("        }\n      }\n")
	}
	b.WriteString("    ]\n  }\n}\n")
	return []byte(b.String())
}

func writeRules(b *strings.Builder, kind string, rs []Rule) {
	fmt.Fprintf(b, "          %s: {\n            allow: [\n", kind)
	for _, r := range rs {
		if r.Why != "" {
			fmt.Fprintf(b, "              # %s\n", r.Why)
		}
		fmt.Fprintf(b, "              %q\n", r.Subject)
	}
	b.WriteString("            ]\n          }\n")
}

const header = `# Generated by ` + "`herald nats-auth`" + ` from herald.yaml: do not edit; run it again
# after adding a butler. One user per service and per butler, each allowed only
# the subjects its job needs (docs/security.md).
#
# Use: put this file beside nats.conf, start nats-server with -c this file, and
# give the server each user's password in the environment variable named
# below (the server refuses to start if one is missing). Each process then
# connects as its user, e.g. NATS_URL=nats://butler-health:<password>@nats:4222.
# Run ` + "`herald setup`" + ` once as the user setup before the services start.

`
