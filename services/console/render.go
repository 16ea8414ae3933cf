package console

import (
	"fmt"
	"html/template"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Text writes the snapshot as `herald status` prints it: processes,
// integrations, queues and butlers, one table each.
func (f *Fleet) Text(w io.Writer) error {
	fmt.Fprintf(w, "Herald fleet on %s at %s\n\n", f.NATS, f.At.Local().Format(time.DateTime))
	t := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(t, "PROCESS\tHOST\tPID\tVERSION\tUP\tREADY")
	for _, p := range f.Processes {
		name := processName(p.Service)
		if p.Runner {
			name += " (runner)"
		}
		fmt.Fprintf(t, "%s\t%s\t%d\t%s\t%s\t%s\n", name, dash(p.Host), p.PID, p.Version, uptime(f.At, p.Started), readiness(p))
	}
	if err := t.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if len(f.Integrations) == 0 {
		fmt.Fprintln(w, "No integrations: no messenger answered.")
	} else {
		fmt.Fprintln(t, "INTEGRATION\tRECEIVER\tLAST IN\tLAST OUT\t")
		for _, in := range f.Integrations {
			state := ""
			if in.CannotWork != "" {
				state = "CANNOT WORK: " + in.CannotWork
			}
			fmt.Fprintf(t, "%s\t%s\t%s\t%s\t%s\n", in.Channel, dash(in.Receiver), ago(f.At, in.LastInbound), ago(f.At, in.LastOutbound), state)
		}
		if err := t.Flush(); err != nil {
			return err
		}
	}
	q := f.Queues
	fmt.Fprintln(w)
	fmt.Fprintln(t, "QUEUE\tWAITING\t")
	fmt.Fprintf(t, "routes to route\t%d\t\n", q.RoutesWaiting)
	fmt.Fprintf(t, "deliveries in flight\t%d\t\n", q.DeliveriesInFlight)
	fmt.Fprintf(t, "dead letters\t%d\t%s\n", q.DeadLetters, hint(q.DeadLetters > 0, "herald dead ls"))
	fmt.Fprintf(t, "held for quiet hours\t%d\t\n", q.Held)
	fmt.Fprintf(t, "open prompts\t%d\t%s\n", q.OpenPrompts, hint(q.OpenPrompts > 0, "waiting for an approver"))
	fmt.Fprintf(t, "open questions\t%d\t\n", q.OpenQuestions)
	if err := t.Flush(); err != nil {
		return err
	}
	if len(f.Butlers) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(t, "BUTLER\tSESSIONS\tLISTENING\tINBOX\tUNREAD\tRUNNER")
		for _, b := range f.Butlers {
			fmt.Fprintf(t, "%s\t%d\t%d\t%d\t%d\t%s\n", b.Name, b.Sessions, b.Listening, b.Inbox, b.Unread, runner(b))
		}
		if err := t.Flush(); err != nil {
			return err
		}
	}
	for _, p := range f.Problems {
		fmt.Fprintf(w, "\nNot known: %s", p)
	}
	if len(f.Problems) > 0 {
		fmt.Fprintln(w)
	}
	return nil
}

// processName is a service as the table shows it: "butler assistant".
func processName(service string) string {
	if name, ok := strings.CutPrefix(service, "butler-"); ok {
		return "butler " + name
	}
	return service
}

func readiness(p Process) string {
	if !p.Ready {
		return "NOT READY: " + reasons(p.NotReady)
	}
	if len(p.Degraded) > 0 {
		return "ready, degraded: " + reasons(p.Degraded)
	}
	return "ready"
}

// reasons lists name: why pairs in name order.
func reasons(m map[string]string) string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, k+": "+m[k])
	}
	return strings.Join(out, "; ")
}

func runner(b Butler) string {
	switch {
	case b.Runner:
		return fmt.Sprintf("%s, %d working", plural(b.Runs, "run"), b.Working)
	case b.RunnerDown != "":
		return "cannot start here: " + b.RunnerDown
	}
	return "-"
}

// plural is "1 run", "2 runs".
func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func hint(show bool, s string) string {
	if show {
		return "(" + s + ")"
	}
	return ""
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// uptime is how long since started, to the second under an hour, to the
// minute after.
func uptime(now, started time.Time) string {
	if started.IsZero() {
		return "-"
	}
	d := max(now.Sub(started), 0)
	if d >= time.Hour {
		return strings.TrimSuffix(d.Round(time.Minute).String(), "0s")
	}
	out := d.Round(time.Second).String()
	if strings.HasSuffix(out, "m0s") {
		out = strings.TrimSuffix(out, "0s")
	}
	return out
}

// ago is t as "3m12s ago", "-" when never.
func ago(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return uptime(now, t) + " ago"
}

var page = template.Must(template.New("page").Funcs(template.FuncMap{
	"name": processName, "ready": readiness, "runner": runner, "dash": dash,
	"up": uptime, "ago": ago, "when": func(t time.Time) string { return t.Format(time.RFC3339) },
}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="5">
<title>Herald fleet</title>
<style>body{font:14px system-ui,sans-serif;margin:2em}table{border-collapse:collapse;margin-bottom:1.5em}
th,td{padding:.2em .8em;text-align:left;border-bottom:1px solid #ddd}.bad{color:#b00020;font-weight:600}</style></head>
<body><h1>Herald fleet</h1><p>On {{.F.NATS}} at {{when .F.At}} (refreshes every 5 s; <code>herald status</code> prints the same, <a href="?format=json">JSON</a>)</p>
{{with .Err}}<p class="bad">{{.}}</p>{{else}}{{with .F}}
<table><tr><th>Process</th><th>Host</th><th>PID</th><th>Version</th><th>Up</th><th>Ready</th></tr>
{{range .Processes}}<tr><td>{{name .Service}}</td><td>{{dash .Host}}</td><td>{{.PID}}</td><td>{{.Version}}</td><td>{{up $.F.At .Started}}</td><td{{if not .Ready}} class="bad"{{end}}>{{ready .}}</td></tr>
{{end}}</table>
<table><tr><th>Integration</th><th>Receiver</th><th>Last in</th><th>Last out</th><th></th></tr>
{{range .Integrations}}<tr><td>{{.Channel}}</td><td>{{dash .Receiver}}</td><td>{{ago $.F.At .LastInbound}}</td><td>{{ago $.F.At .LastOutbound}}</td><td class="bad">{{with .CannotWork}}CANNOT WORK: {{.}}{{end}}</td></tr>
{{end}}</table>
<table><tr><th>Queue</th><th>Waiting</th></tr>
<tr><td>routes to route</td><td>{{.Queues.RoutesWaiting}}</td></tr>
<tr><td>deliveries in flight</td><td>{{.Queues.DeliveriesInFlight}}</td></tr>
<tr><td>dead letters</td><td>{{.Queues.DeadLetters}}</td></tr>
<tr><td>held for quiet hours</td><td>{{.Queues.Held}}</td></tr>
<tr><td>open prompts</td><td>{{.Queues.OpenPrompts}}</td></tr>
<tr><td>open questions</td><td>{{.Queues.OpenQuestions}}</td></tr></table>
{{if .Butlers}}<table><tr><th>Butler</th><th>Sessions</th><th>Listening</th><th>Inbox</th><th>Unread</th><th>Runner</th></tr>
{{range .Butlers}}<tr><td>{{.Name}}</td><td>{{.Sessions}}</td><td>{{.Listening}}</td><td>{{.Inbox}}</td><td>{{.Unread}}</td><td>{{runner .}}</td></tr>
{{end}}</table>{{end}}
{{range .Problems}}<p>Not known: {{.}}</p>{{end}}
{{end}}{{end}}</body></html>
`))

// HTML writes the snapshot as the operations port's page; err, if set, is
// said instead of (or above) it.
func (f *Fleet) HTML(w io.Writer, err error) error {
	var msg string
	if err != nil {
		msg = err.Error()
	}
	return page.Execute(w, struct {
		F   *Fleet
		Err string
	}{f, msg})
}
