package e2e

// The alerting rules of deploy/alerts.yml and the Grafana dashboard are
// only as good as the metrics they name: a rule on a name no process serves
// never fires, and nothing says so. TestAlertsNameServedMetrics holds both
// to what a real herald dev, run on deploy/herald.yaml, serves on /metrics;
// TestAlertRulesPromtool has Prometheus's own promtool check the rules and
// run their unit tests (deploy/alerts_test.yml). `make alerts-test` runs
// both, with promtool built from the Go module proxy.

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/testkit"
)

// alertRule is one rule of deploy/alerts.yml.
type alertRule struct {
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

func readAlertRules(t *testing.T) []alertRule {
	t.Helper()
	var file struct {
		Groups []struct {
			Name  string      `yaml:"name"`
			Rules []alertRule `yaml:"rules"`
		} `yaml:"groups"`
	}
	readYAML(t, filepath.Join(deployDir, "alerts.yml"), &file)
	var rules []alertRule
	for _, g := range file.Groups {
		rules = append(rules, g.Rules...)
	}
	if len(rules) == 0 {
		t.Fatal("deploy/alerts.yml has no rules")
	}
	return rules
}

// promJobs are the scrape jobs of deploy/prometheus.yml.
func promJobs(t *testing.T) []string {
	t.Helper()
	var prom struct {
		RuleFiles     []string `yaml:"rule_files"`
		ScrapeConfigs []struct {
			JobName string `yaml:"job_name"`
		} `yaml:"scrape_configs"`
	}
	readYAML(t, filepath.Join(deployDir, "prometheus.yml"), &prom)
	if !slices.Contains(prom.RuleFiles, "alerts.yml") {
		t.Errorf("deploy/prometheus.yml's rule_files %q do not load alerts.yml", prom.RuleFiles)
	}
	var jobs []string
	for _, sc := range prom.ScrapeConfigs {
		jobs = append(jobs, sc.JobName)
	}
	return jobs
}

// dashboardExprs are the PromQL expressions of deploy/grafana's dashboard:
// its panels' queries and its variables', by where they are.
func dashboardExprs(t *testing.T) map[string]string {
	t.Helper()
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal([]byte(mustRead(t, filepath.Join(deployDir, "grafana", "herald-dashboard.json"))), &dash); err != nil {
		t.Fatal(err)
	}
	exprs := map[string]string{}
	for _, p := range dash.Panels {
		for i, tg := range p.Targets {
			exprs[fmt.Sprintf("dashboard panel %q query %d", p.Title, i+1)] = tg.Expr
		}
	}
	for _, v := range dash.Templating.List {
		if v.Definition != "" {
			exprs[fmt.Sprintf("dashboard variable %q", v.Name)] = v.Definition
		}
	}
	return exprs
}

// family is one metric family of an exposition: its HELP, TYPE and labels.
type family struct {
	help, typ string
	labels    map[string]bool
}

// parseExposition reads Prometheus's text format into families by name.
func parseExposition(text string) map[string]*family {
	fams := map[string]*family{}
	get := func(name string) *family {
		f := fams[name]
		if f == nil {
			f = &family{labels: map[string]bool{}}
			fams[name] = f
		}
		return f
	}
	series := regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s`)
	label := regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="`)
	for line := range strings.Lines(text) {
		line = strings.TrimRight(line, "\n")
		if rest, ok := strings.CutPrefix(line, "# HELP "); ok {
			name, help, _ := strings.Cut(rest, " ")
			get(name).help = help
			continue
		}
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, typ, _ := strings.Cut(rest, " ")
			get(name).typ = typ
			continue
		}
		m := series.FindStringSubmatch(line + " ")
		if m == nil {
			continue
		}
		name := m[1]
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suffix); ok && fams[base] != nil && fams[base].typ == "histogram" {
				name = base
			}
		}
		f := get(name)
		for _, l := range label.FindAllStringSubmatch(m[3], -1) {
			if l[1] != "le" {
				f.labels[l[1]] = true
			}
		}
	}
	return fams
}

// promqlNames are the metric names an expression selects, each with the
// label names its matchers use, and the labels of its by/without clauses.
func promqlNames(expr string) (names map[string][]string, grouping []string) {
	// Label values ("butler-.+", "$butler") name no metric.
	expr = regexp.MustCompile(`"[^"]*"`).ReplaceAllString(expr, `""`)
	names = map[string][]string{}
	sel := regexp.MustCompile(`(?:^|[^a-zA-Z0-9_:])((?:herald|go|process)_[a-zA-Z0-9_]+|up)\b\s*(\{[^}]*\})?`)
	matcher := regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)`)
	for _, m := range sel.FindAllStringSubmatch(expr, -1) {
		var labels []string
		for _, lm := range matcher.FindAllStringSubmatch(m[2], -1) {
			labels = append(labels, lm[1])
		}
		names[m[1]] = append(names[m[1]], labels...)
	}
	for _, g := range regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`).FindAllStringSubmatch(expr, -1) {
		for l := range strings.SplitSeq(g[1], ",") {
			if l = strings.TrimSpace(l); l != "" {
				grouping = append(grouping, l)
			}
		}
	}
	return names, grouping
}

// targetLabels are the labels Prometheus puts on every series it scrapes.
var targetLabels = []string{"job", "instance"}

// onlyAfterEvent are metrics the dashboard shows whose family a process
// serves only from its first event, which this test does not cause: why,
// and the labels the dashboard may select them by.
var onlyAfterEvent = map[string]struct {
	why    string
	labels []string
}{
	"herald_approvals_answered_total": {"counts an approver's answer to a permission prompt, and no prompt is answered here", []string{"butler", "verdict"}},
}

// TestAlertsNameServedMetrics: every metric deploy/alerts.yml and the
// dashboard name is one a real fleet serves, with its HELP and TYPE and the
// labels they select or group by. The fleet is herald dev on
// deploy/herald.yaml (its listeners moved to free loopback ports): one
// process serving every service's metrics, as each service of the compose
// fleet serves its own. The rules' metrics must be there before anything
// happens, or an alert could not see the first failure; the dashboard's
// after one notify delivered and one refused. The alerts' own promises are
// checked too: each says what to run, and HeraldServiceMissing names every
// job of prometheus.yml.
func TestAlertsNameServedMetrics(t *testing.T) {
	if testing.Short() {
		t.Skip("starts herald dev; not with -short")
	}
	rules := readAlertRules(t)
	jobs := promJobs(t)
	command := regexp.MustCompile("`(docker compose|herald|curl) [^`]+`")
	for _, r := range rules {
		if r.Alert == "" || r.Expr == "" {
			t.Errorf("deploy/alerts.yml: a rule without alert or expr: %+v", r)
			continue
		}
		if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
			t.Errorf("%s: no summary or description annotation: the operator would see only its name", r.Alert)
		}
		if !command.MatchString(r.Annotations["description"]) {
			t.Errorf("%s: its description names no command to run (`herald ...`, `docker compose ...`): %q", r.Alert, r.Annotations["description"])
		}
		if s := r.Labels["severity"]; s != "warning" && s != "critical" {
			t.Errorf("%s: severity %q, want warning or critical", r.Alert, s)
		}
	}
	// A stopped service leaves no target, so up == 0 cannot see it.
	for _, r := range rules {
		if r.Alert != "HeraldServiceMissing" {
			continue
		}
		var absent []string
		for _, m := range regexp.MustCompile(`absent\(up\{job="([^"]+)"\}\)`).FindAllStringSubmatch(r.Expr, -1) {
			absent = append(absent, m[1])
		}
		slices.Sort(absent)
		want := slices.Sorted(slices.Values(jobs))
		if !slices.Equal(absent, want) {
			t.Errorf("HeraldServiceMissing watches the jobs %v, prometheus.yml scrapes %v", absent, want)
		}
	}

	dev, metricsURL := startDeployDev(t)
	fresh := scrape(t, metricsURL)
	for _, r := range rules {
		checkNames(t, "deploy/alerts.yml "+r.Alert, r.Expr, fresh, jobs, nil)
	}

	// One notify delivered (delivery and provider call times) and one the
	// switchboard refuses (an integration that is not there).
	token := "HERALD_MCP_TOKEN=" + deployDevToken
	runHerald(t, dev.dir, []string{token}, "notify", "--url", dev.state.Butlers["health"], "--channel", "log", "alerts test")
	runHerald(t, dev.dir, []string{token}, "notify", "--url", dev.state.Butlers["health"], "--channel", "telegram:nowhere", "alerts test")
	var after map[string]*family
	testkit.EventuallyEvery(t, 30*time.Second, 100*time.Millisecond, func() bool {
		after = scrape(t, metricsURL)
		return after["herald_delivery_seconds"] != nil && after["herald_notifies_refused_total"] != nil
	}, "herald dev's /metrics counting the delivered and the refused notify")
	shown := map[string]bool{}
	for where, expr := range dashboardExprs(t) {
		checkNames(t, where, expr, after, jobs, onlyAfterEvent)
		names, _ := promqlNames(expr)
		for name := range names {
			shown[familyOf(name, after)] = true
		}
	}
	for name := range onlyAfterEvent {
		if after[name] != nil {
			t.Errorf("%s is served now: remove it from onlyAfterEvent", name)
		}
	}
	// What the fleet serves, an operator sees: on a panel, or in an alert.
	for _, r := range rules {
		names, _ := promqlNames(r.Expr)
		for name := range names {
			shown[familyOf(name, after)] = true
		}
	}
	// And docs/fleet.md's table of metrics names it.
	fleet := mustRead(t, filepath.Join("..", "docs", "fleet.md"))
	for name := range after {
		if !strings.HasPrefix(name, "herald_") {
			continue
		}
		if !shown[name] {
			t.Errorf("herald dev serves %s, which no dashboard panel shows and no alert of deploy/alerts.yml watches", name)
		}
		if !strings.Contains(fleet, "| `"+name+"`") && !strings.Contains(fleet, ", `"+name+"`") {
			t.Errorf("herald dev serves %s, which docs/fleet.md's table of metrics does not name", name)
		}
	}
}

// familyOf is the family of fams a selected name is a series of: a
// histogram's for its _bucket, _sum and _count, else name itself.
func familyOf(name string, fams map[string]*family) string {
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if b, ok := strings.CutSuffix(name, suffix); ok && fams[b] != nil && fams[b].typ == "histogram" {
			return b
		}
	}
	return name
}

// checkNames fails for every metric expr selects that fams does not have
// with HELP and TYPE (up: for a job prometheus.yml does not scrape), and
// every label it selects or groups by that no metric of it has.
func checkNames(t *testing.T, where, expr string, fams map[string]*family, jobs []string, excused map[string]struct {
	why    string
	labels []string
}) {
	t.Helper()
	names, grouping := promqlNames(expr)
	if len(names) == 0 {
		t.Errorf("%s: %q selects no metric", where, expr)
	}
	have := slices.Clone(targetLabels)
	for name, labels := range names {
		if name == "up" {
			// Prometheus's own per target: 1 scraped, 0 not.
			for _, l := range labels {
				if !slices.Contains(targetLabels, l) {
					t.Errorf("%s: up has no label %s", where, l)
				}
			}
			continue
		}
		if e, ok := excused[name]; ok {
			have = append(have, e.labels...)
			for _, l := range labels {
				if !slices.Contains(e.labels, l) && !slices.Contains(targetLabels, l) {
					t.Errorf("%s: %s has no label %s (it has %v)", where, name, l, e.labels)
				}
			}
			continue
		}
		base := familyOf(name, fams)
		f := fams[base]
		if f == nil || f.help == "" || f.typ == "" {
			t.Errorf("%s: %s is not a metric herald dev serves on /metrics (with # HELP and # TYPE): %q", where, name, expr)
			continue
		}
		for l := range f.labels {
			have = append(have, l)
		}
		for _, l := range labels {
			if !f.labels[l] && !(l == "le" && base != name) && !slices.Contains(targetLabels, l) {
				t.Errorf("%s: %s has no label %s (it has %v)", where, base, l, slices.Sorted(maps.Keys(f.labels)))
			}
		}
	}
	for _, l := range grouping {
		if !slices.Contains(have, l) && l != "le" {
			t.Errorf("%s: groups by %s, which none of %v has", where, l, slices.Sorted(maps.Keys(names)))
		}
	}
	// The jobs up names must be jobs of prometheus.yml.
	for _, m := range regexp.MustCompile(`\bup\{job="([^"]+)"\}`).FindAllStringSubmatch(expr, -1) {
		if !slices.Contains(jobs, m[1]) {
			t.Errorf("%s: up{job=%q}: prometheus.yml has no such job (it has %v)", where, m[1], jobs)
		}
	}
}

// deployDevToken is the MCP bearer token of both butlers of the test's
// herald dev (their mcp_token_env).
const deployDevToken = "alerts-test-token-0123456789abcdef"

// startDeployDev runs herald dev on deploy/herald.yaml with its listeners
// on free loopback ports and NATS embedded, and returns it and its /metrics.
func startDeployDev(t *testing.T) (*devProc, string) {
	t.Helper()
	yaml := mustRead(t, filepath.Join(deployDir, "herald.yaml"))
	const natsURL = "  url: nats://nats:4222"
	if !strings.Contains(yaml, natsURL) {
		t.Fatalf("deploy/herald.yaml no longer has %q: update this test", natsURL)
	}
	yaml = regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(natsURL)+`.*$`).ReplaceAllString(yaml, `  listen: "127.0.0.1:0"`)
	listeners := regexp.MustCompile(`0\.0\.0\.0:\d+`)
	if len(listeners.FindAllString(yaml, -1)) == 0 {
		t.Fatal("deploy/herald.yaml listens on no 0.0.0.0:PORT: update this test")
	}
	yaml = listeners.ReplaceAllStringFunc(yaml, func(string) string { return testkit.FreeAddr(t) })
	httpAddr := testkit.FreeAddr(t)
	yaml += fmt.Sprintf("\nhttp_listen: %q\n", httpAddr)
	// The provider secrets stay unset: telegram:tg_main and email:mail
	// cannot work (herald_integration_up 0), and nothing leaves the machine.
	dev := startDev(t, nil, "alerts", yaml, 0, "HEALTH_MCP_TOKEN="+deployDevToken, "FINANCE_MCP_TOKEN="+deployDevToken)
	return dev, "http://" + httpAddr + "/metrics"
}

func scrape(t *testing.T, url string) map[string]*family {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	return parseExposition(string(b))
}

// runHerald runs the herald binary in dir and returns what it printed.
func runHerald(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	bin, err := heraldBin()
	if err != nil {
		t.Fatal(err)
	}
	c := exec.CommandContext(t.Context(), bin, args...)
	c.Dir, c.Env = dir, append(cleanEnv(), env...)
	out, _ := c.CombinedOutput()
	return string(out)
}

// TestAlertRulesPromtool: Prometheus's own promtool (PROMTOOL, which
// `make alerts-test` builds) loads deploy/alerts.yml as the compose
// Prometheus does (check rules; check config, which loads prometheus.yml's
// rule_files), and runs deploy/alerts_test.yml, in which every alert fires
// on its condition for the series it names, with the summary and
// description an operator reads.
func TestAlertRulesPromtool(t *testing.T) {
	promtool := os.Getenv("PROMTOOL")
	if promtool == "" {
		t.Skip("PROMTOOL is not set: `make alerts-test` builds Prometheus's promtool from the Go module proxy and runs this test with it (.ci/run does)")
	}
	run := func(args ...string) string {
		t.Helper()
		c := exec.CommandContext(t.Context(), promtool, args...)
		c.Dir = deployDir
		out, err := c.CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	rules := readAlertRules(t)
	if out := run("check", "rules", "alerts.yml"); !strings.Contains(out, fmt.Sprintf("SUCCESS: %d rules found", len(rules))) {
		t.Errorf("promtool check rules alerts.yml does not find the %d rules:\n%s", len(rules), out)
	}
	if out := run("check", "config", "prometheus.yml"); !strings.Contains(out, "SUCCESS: 1 rule files found") {
		t.Errorf("promtool check config prometheus.yml loads no rule file:\n%s", out)
	}
	if out := run("test", "rules", "alerts_test.yml"); !strings.Contains(out, "SUCCESS") {
		t.Errorf("promtool test rules alerts_test.yml:\n%s", out)
	}

	// Every alert has a case in alerts_test.yml where it fires.
	var tests struct {
		RuleFiles []string `yaml:"rule_files"`
		Tests     []struct {
			AlertRuleTest []struct {
				Alertname string `yaml:"alertname"`
				ExpAlerts []struct {
					ExpLabels map[string]string `yaml:"exp_labels"`
				} `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	readYAML(t, filepath.Join(deployDir, "alerts_test.yml"), &tests)
	if !slices.Equal(tests.RuleFiles, []string{"alerts.yml"}) {
		t.Errorf("alerts_test.yml tests %v, want alerts.yml", tests.RuleFiles)
	}
	fires := map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			}
		}
	}
	for _, r := range rules {
		if !fires[r.Alert] {
			t.Errorf("alerts_test.yml has no case in which %s fires", r.Alert)
		}
	}
}
