package e2e

// These tests load deploy/'s compose files the way `docker compose` does,
// with compose-go, in every `make test`, and check what would otherwise
// show only on someone's `docker compose up`: a service without a health
// check or restart policy, a health check Docker Engine 20.10 refuses, a
// port published beyond 127.0.0.1, a connection to NATS without a user of
// its own, a dependency that waits for the wrong thing, a binary the image
// does not have, a mounted file that is not there, a cluster whose routes,
// names or replicas disagree. The fleet itself runs in real containers in
// `make compose-test` (e2e/compose), and its NATS configuration in the
// chaos scenarios (e2e/chaos).

import (
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/heraldhq/herald/pkg/natsauth"
	"go.yaml.in/yaml/v3"
)

const deployDir = "../deploy"

// composeEnv stands in for deploy/.env: every variable the compose files
// require (${VAR:?...}) has a value, as herald init writes them.
var composeEnv = []string{
	"HEALTH_MCP_TOKEN=health-token",
	"FINANCE_MCP_TOKEN=finance-token",
	"HERALD_NATS_SWITCHBOARD_PASSWORD=switchboard-pw",
	"HERALD_NATS_MESSENGER_PASSWORD=messenger-pw",
	"HERALD_NATS_BUTLER_HEALTH_PASSWORD=health-pw",
	"HERALD_NATS_BUTLER_FINANCE_PASSWORD=finance-pw",
	"HERALD_NATS_OPERATOR_PASSWORD=operator-pw",
	"HERALD_NATS_SETUP_PASSWORD=setup-pw",
}

// oneShots are the services that run a command and exit: setup before the
// fleet starts, pair and herald when the operator runs them. Every other
// service runs for good.
var oneShots = []string{"setup", "pair", "herald"}

// operatorTools are the one-shots that run the operator's commands, as the
// NATS user operator.
var operatorTools = []string{"pair", "herald"}

// fleets are the supported combinations of compose files.
var fleets = []struct {
	name  string
	files []string
	nodes []string // the NATS services
}{
	{"single node", []string{"compose.yaml"}, []string{"nats"}},
	{"cluster", []string{"compose.yaml", "compose.cluster.yaml"}, []string{"nats", "nats-2", "nats-3"}},
}

// loadCompose loads files from deploy/ with every profile on, as
// `docker compose -f ... --profile '*' config` would.
func loadCompose(t *testing.T, env []string, files ...string) *types.Project {
	t.Helper()
	paths := make([]string, len(files))
	for i, f := range files {
		paths[i] = filepath.Join(deployDir, f)
	}
	opts, err := cli.NewProjectOptions(paths,
		cli.WithWorkingDirectory(deployDir),
		cli.WithEnv(env),
		cli.WithProfiles([]string{"*"}),
	)
	if err != nil {
		t.Fatal(err)
	}
	p, err := opts.LoadProject(t.Context())
	if err != nil {
		t.Fatalf("docker compose -f %s: %v", strings.Join(files, " -f "), err)
	}
	return p
}

// image is what deploy/Dockerfile builds: the binaries (one per
// services/cmd directory) and the directory they are copied to.
type image struct {
	binDir   string
	binaries []string
}

// readImage checks that deploy/Dockerfile builds every services/cmd binary
// and that deploy/rootfs.sh puts them all into the image's /usr/local/bin.
func readImage(t *testing.T) image {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(deployDir, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^RUN go build .*-o /out/ \./services/cmd/\.\.\. github\.com/nats-io/nats-server/v2 `).Match(b) {
		t.Fatal("deploy/Dockerfile no longer builds ./services/cmd/... and nats-server into /out/; update this test")
	}
	rootfs, err := os.ReadFile(filepath.Join(deployDir, "rootfs.sh"))
	if err != nil {
		t.Fatal(err)
	}
	img := image{binDir: "/usr/local/bin"}
	dirs, err := os.ReadDir("../services/cmd")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join("../services/cmd", d.Name(), "main.go")); err != nil {
			continue
		}
		img.binaries = append(img.binaries, d.Name())
		if !regexp.MustCompile(`(?m)^cp .*"\$bin/` + d.Name() + `".* "\$out/(base|herald)/usr/local/bin/"$`).Match(rootfs) {
			t.Errorf("deploy/rootfs.sh does not put %s into the Herald image's /usr/local/bin", d.Name())
		}
	}
	return img
}

// isHerald reports whether s runs the Herald image (deploy/Dockerfile, target herald).
func isHerald(s types.ServiceConfig) bool {
	return s.Build != nil && s.Build.Dockerfile == "deploy/Dockerfile" && s.Build.Target == "herald"
}

// isNATS reports whether s runs the NATS image (deploy/Dockerfile, target nats).
func isNATS(s types.ServiceConfig) bool {
	return s.Build != nil && s.Build.Dockerfile == "deploy/Dockerfile" && s.Build.Target == "nats"
}

// natsHTTPPort is the monitoring port of deploy/nats.conf (http_port).
func natsHTTPPort(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(deployDir, "nats.conf"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^http_port:\s*(\d+)\s*$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("deploy/nats.conf has no http_port: the NATS health check asks it")
	}
	return string(m[1])
}

func TestComposeServices(t *testing.T) {
	img := readImage(t)
	natsHTTP := natsHTTPPort(t)
	for _, fl := range fleets {
		t.Run(fl.name, func(t *testing.T) {
			p := loadCompose(t, composeEnv, fl.files...)
			var nodes []string
			for name, s := range p.Services {
				if isNATS(s) {
					nodes = append(nodes, name)
				}
			}
			sort.Strings(nodes)
			if !slices.Equal(nodes, fl.nodes) {
				t.Fatalf("NATS services %v, want %v", nodes, fl.nodes)
			}
			for _, name := range p.ServiceNames() {
				s := p.Services[name]
				oneShot := slices.Contains(oneShots, name)
				checkLifecycle(t, name, s, oneShot)
				checkDependencies(t, p, name, s)
				checkMounts(t, name, s)
				checkPorts(t, name, s)
				if isHerald(s) {
					checkHerald(t, img, fl.nodes, name, s, oneShot)
				}
				if slices.Contains(fl.nodes, name) {
					checkNATSNode(t, natsHTTP, name, s)
				}
			}
			// The order compose.yaml promises: every NATS node healthy, then
			// setup, then the services.
			setup := p.Services["setup"]
			for _, n := range fl.nodes {
				if d, ok := setup.DependsOn[n]; !ok || d.Condition != types.ServiceConditionHealthy {
					t.Errorf("setup does not wait for %s to be healthy (%+v): herald setup makes R%d streams, which needs every node", n, d, len(fl.nodes))
				}
			}
			for _, name := range p.ServiceNames() {
				if s := p.Services[name]; !isHerald(s) || slices.Contains(oneShots, name) {
					continue
				}
				if _, ok := p.Services[name].DependsOn["setup"]; !ok {
					t.Errorf("%s does not wait for setup: it would start before the streams and consumers exist", name)
				}
			}
			if len(fl.nodes) > 1 {
				checkCluster(t, p, fl.nodes)
			}
		})
	}
}

// checkLifecycle: a long-running service restarts by itself and says when it
// is healthy; a one-shot does neither.
func checkLifecycle(t *testing.T, name string, s types.ServiceConfig, oneShot bool) {
	t.Helper()
	hc := s.HealthCheck
	if oneShot {
		if s.Restart != "no" {
			t.Errorf("%s: restart %q, a one-shot wants \"no\"", name, s.Restart)
		}
		if hc == nil || !hc.Disable {
			t.Errorf("%s: a one-shot with a health check (%+v); disable it", name, hc)
		}
		return
	}
	if s.Restart != types.RestartPolicyUnlessStopped {
		t.Errorf("%s: restart %q, want %q", name, s.Restart, types.RestartPolicyUnlessStopped)
	}
	if hc == nil || hc.Disable || len(hc.Test) < 2 {
		t.Errorf("%s: no health check (%+v)", name, hc)
		return
	}
	// No image of the fleet runs a shell for the Herald services and NATS
	// should not need one: exec form only.
	if hc.Test[0] != "CMD" {
		t.Errorf("%s: health check %q, want the exec form [\"CMD\", ...]", name, hc.Test)
	}
	if hc.Interval == nil || hc.Timeout == nil || hc.Retries == nil || hc.StartPeriod == nil {
		t.Errorf("%s: health check without interval, timeout, retries and start_period: %+v", name, hc)
	}
	if hc.StartInterval != nil {
		t.Errorf("%s: health check with start_interval, which Docker Engine before 25 refuses (the fleet supports 20.10)", name)
	}
}

// checkPorts: every published port is bound to HERALD_BIND, 127.0.0.1
// unless the operator opts in (composeEnv does not set it).
func checkPorts(t *testing.T, name string, s types.ServiceConfig) {
	t.Helper()
	for _, p := range s.Ports {
		if p.HostIP != "127.0.0.1" {
			t.Errorf("%s publishes %s on %q; only 127.0.0.1 unless HERALD_BIND says otherwise", name, p.Published, p.HostIP)
		}
	}
}

// checkDependencies: a service waits for a long-running one to be healthy
// and for a one-shot to have succeeded.
func checkDependencies(t *testing.T, p *types.Project, name string, s types.ServiceConfig) {
	t.Helper()
	for dep, d := range s.DependsOn {
		want := types.ServiceConditionHealthy
		if slices.Contains(oneShots, dep) {
			want = types.ServiceConditionCompletedSuccessfully
		}
		if _, ok := p.Services[dep]; !ok {
			t.Errorf("%s depends on %s, which is not a service", name, dep)
		}
		if d.Condition != want {
			t.Errorf("%s waits for %s with condition %s, want %s", name, dep, d.Condition, want)
		}
	}
}

// checkMounts: every file mounted from the host is in deploy/ (or is
// deploy/ itself's file) and exists.
func checkMounts(t *testing.T, name string, s types.ServiceConfig) {
	t.Helper()
	deploy, err := filepath.Abs(deployDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range s.Volumes {
		if v.Type != types.VolumeTypeBind {
			continue
		}
		rel, err := filepath.Rel(deploy, v.Source)
		if err != nil || strings.HasPrefix(rel, "..") {
			t.Errorf("%s mounts %s, outside deploy/", name, v.Source)
			continue
		}
		if _, err := os.Stat(v.Source); err != nil {
			t.Errorf("%s mounts deploy/%s at %s: %v", name, rel, v.Target, err)
		}
		if !v.ReadOnly {
			t.Errorf("%s mounts deploy/%s writable; the fleet only reads its configuration", name, rel)
		}
	}
	for _, f := range s.EnvFiles {
		if f.Required {
			t.Errorf("%s requires env_file %s; .env is optional (a fresh checkout has none)", name, f.Path)
		}
	}
}

// mount is the host file s mounts at target, or "".
func mount(s types.ServiceConfig, target string) string {
	for _, v := range s.Volumes {
		if v.Target == target {
			return v.Source
		}
	}
	return ""
}

// checkHerald: the command is a binary of the image, the health check is
// the image's herald asking the service's own /readyz, which listens where
// Prometheus can reach it, and the configuration file is mounted.
func checkHerald(t *testing.T, img image, nodes []string, name string, s types.ServiceConfig, oneShot bool) {
	t.Helper()
	argv := []string(s.Entrypoint)
	if len(argv) == 0 {
		argv = s.Command
	}
	if len(argv) == 0 || !slices.Contains(img.binaries, path.Base(argv[0])) {
		t.Errorf("%s runs %q; the image has %v", name, argv, img.binaries)
	}
	env := func(k string) string {
		if v := s.Environment[k]; v != nil {
			return *v
		}
		return ""
	}
	cfg := env("HERALD_CONFIG")
	if cfg == "" || mount(s, cfg) == "" {
		t.Errorf("%s: HERALD_CONFIG %q is not a mounted file", name, cfg)
	}
	checkNATSURL(t, name, env("NATS_URL"), nodes)
	if oneShot {
		return
	}
	host, port, err := net.SplitHostPort(env("HERALD_HTTP_LISTEN"))
	if err != nil || host != "0.0.0.0" {
		t.Errorf("%s: HERALD_HTTP_LISTEN %q; want 0.0.0.0:PORT, so Prometheus reaches /metrics from its container", name, env("HERALD_HTTP_LISTEN"))
	}
	want := []string{"CMD", path.Join(img.binDir, "herald"), "healthcheck", "http://127.0.0.1:" + port + "/readyz"}
	if s.HealthCheck != nil && !slices.Equal(s.HealthCheck.Test, want) {
		t.Errorf("%s: health check %q, want %q (the image's herald, its /readyz)", name, s.HealthCheck.Test, want)
	}
}

// checkNATSURL: the service connects as a NATS user with a password, to
// the name every NATS node answers to.
func checkNATSURL(t *testing.T, name, natsURL string, nodes []string) {
	t.Helper()
	u, err := url.Parse(natsURL)
	if err != nil || u.Scheme != "nats" || strings.Contains(natsURL, ",") {
		t.Errorf("%s: NATS_URL %q: want one nats:// URL", name, natsURL)
		return
	}
	if pw, ok := u.User.Password(); u.User == nil || u.User.Username() == "" || !ok || pw == "" {
		t.Errorf("%s: NATS_URL %q has no user and password: no unauthenticated NATS in the fleet", name, natsURL)
	}
	if u.Hostname() != "nats" {
		t.Errorf("%s: NATS_URL names %s; the NATS nodes %v all answer to nats", name, u.Hostname(), nodes)
	}
}

// checkNATSNode: NATS runs from a mounted configuration with users (no
// unauthenticated NATS), with everything it includes mounted, keeps its
// store on a volume, reads the users' passwords from .env, and its health
// check is the image's herald asking the monitoring port of nats.conf.
func checkNATSNode(t *testing.T, httpPort, name string, s types.ServiceConfig) {
	t.Helper()
	want := []string{"CMD", "/usr/local/bin/herald", "healthcheck", "http://127.0.0.1:" + httpPort + "/healthz"}
	if s.HealthCheck != nil && !slices.Equal(s.HealthCheck.Test, want) {
		t.Errorf("%s: health check %q, want %q", name, s.HealthCheck.Test, want)
	}
	i := slices.Index(s.Command, "-c")
	if i < 0 || i+1 >= len(s.Command) {
		t.Errorf("%s: command %q names no configuration file (-c)", name, s.Command)
		return
	}
	conf := s.Command[i+1]
	var text strings.Builder
	var walk func(conf string)
	walk = func(conf string) {
		src := mount(s, conf)
		if src == "" {
			t.Errorf("%s: %s is not mounted", name, conf)
			return
		}
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		text.Write(b)
		for _, m := range regexp.MustCompile(`(?m)^include\s+(\S+)\s*$`).FindAllStringSubmatch(string(b), -1) {
			walk(path.Join(path.Dir(conf), m[1]))
		}
	}
	walk(conf)
	if !strings.Contains(text.String(), "accounts {") || !strings.Contains(text.String(), `user: "setup"`) {
		t.Errorf("%s: %s has no users (nats-secure.conf): NATS would take anyone", name, conf)
	}
	if len(s.EnvFiles) == 0 {
		t.Errorf("%s: no env_file: nats-secure.conf reads the users' passwords from the environment (.env)", name)
	}
	var data *types.ServiceVolumeConfig
	for _, v := range s.Volumes {
		if v.Target == "/data" {
			data = &v
		}
	}
	if data == nil || data.Type != types.VolumeTypeVolume {
		t.Errorf("%s: JetStream's store (/data) is not on a named volume: %+v", name, data)
	}
}

// checkCluster: each node has its own name and volume, the routes of
// nats-cluster.conf reach exactly the NATS services, and every Herald
// service reads a herald.yaml with replicas for all of them.
func checkCluster(t *testing.T, p *types.Project, nodes []string) {
	t.Helper()
	names, volumes := map[string]string{}, map[string]string{}
	var routesConf string
	for _, n := range nodes {
		s := p.Services[n]
		if v := s.Environment["HERALD_NATS_SERVER_NAME"]; v == nil || *v == "" {
			t.Errorf("%s: no HERALD_NATS_SERVER_NAME; nats-cluster.conf takes the node's name from it", n)
		} else if other, dup := names[*v]; dup {
			t.Errorf("%s and %s are both named %s", other, n, *v)
		} else {
			names[*v] = n
		}
		for _, v := range s.Volumes {
			if v.Target != "/data" {
				continue
			}
			if other, dup := volumes[v.Source]; dup {
				t.Errorf("%s and %s share the volume %s", other, n, v.Source)
			}
			volumes[v.Source] = n
		}
		if c := mount(s, "/etc/nats/nats-cluster.conf"); c == "" {
			t.Errorf("%s does not mount nats-cluster.conf", n)
		} else {
			routesConf = c
		}
	}
	if routesConf == "" {
		return
	}
	b, err := os.ReadFile(routesConf)
	if err != nil {
		t.Fatal(err)
	}
	listen := regexp.MustCompile(`(?m)^\s*listen:\s*0\.0\.0\.0:(\d+)\s*$`).FindStringSubmatch(string(b))
	if listen == nil {
		t.Fatal("nats-cluster.conf: no cluster listen on 0.0.0.0")
	}
	// Each route names one node (by its service name or an alias of its
	// own), every node has one, and the clients' name nats is every node's.
	routed := map[string]bool{}
	for _, m := range regexp.MustCompile(`nats-route://([^:\s]+):(\d+)`).FindAllStringSubmatch(string(b), -1) {
		if m[2] != listen[1] {
			t.Errorf("nats-cluster.conf: route to %s:%s, the nodes listen on %s", m[1], m[2], listen[1])
		}
		var to []string
		for _, n := range nodes {
			if slices.Contains(nodeNames(p.Services[n], n), m[1]) {
				to = append(to, n)
			}
		}
		if len(to) != 1 {
			t.Errorf("nats-cluster.conf: the route to %s reaches %v, want one node", m[1], to)
			continue
		}
		routed[to[0]] = true
	}
	for _, n := range nodes {
		if !routed[n] {
			t.Errorf("nats-cluster.conf has no route to %s", n)
		}
		if !slices.Contains(nodeNames(p.Services[n], n), "nats") {
			t.Errorf("%s does not answer to nats, the name in every service's NATS_URL", n)
		}
	}
	for _, name := range p.ServiceNames() {
		s := p.Services[name]
		if !isHerald(s) {
			continue
		}
		var cfg struct {
			NATS struct {
				Replicas int `yaml:"replicas"`
			} `yaml:"nats"`
		}
		readYAML(t, mount(s, "/etc/herald/herald.yaml"), &cfg)
		if cfg.NATS.Replicas != len(nodes) {
			t.Errorf("%s reads a herald.yaml with nats.replicas %d on %d nodes", name, cfg.NATS.Replicas, len(nodes))
		}
	}
}

// nodeNames are the names a service answers to on the default network.
func nodeNames(s types.ServiceConfig, name string) []string {
	names := []string{name}
	if n, ok := s.Networks["default"]; ok && n != nil {
		names = append(names, n.Aliases...)
	}
	return names
}

func readYAML(t *testing.T, file string, v any) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

// TestComposeClusterConfig: herald.cluster.yaml is herald.yaml with another
// nats block, so the cluster runs the fleet the operator configured.
func TestComposeClusterConfig(t *testing.T) {
	var single, cluster map[string]any
	readYAML(t, filepath.Join(deployDir, "herald.yaml"), &single)
	readYAML(t, filepath.Join(deployDir, "herald.cluster.yaml"), &cluster)
	delete(single, "nats")
	delete(cluster, "nats")
	if !reflect.DeepEqual(single, cluster) {
		t.Error("deploy/herald.cluster.yaml differs from deploy/herald.yaml outside the nats block: copy herald.yaml over it, keeping its header and nats block")
	}
}

// TestComposeSecureUsers: every Herald service connects as a NATS user of
// its own, with the password variable nats-secure.conf gives that user, and
// the fleet's one-node and cluster files leave none out.
func TestComposeSecureUsers(t *testing.T) {
	conf, err := os.ReadFile(filepath.Join(deployDir, "nats-secure.conf"))
	if err != nil {
		t.Fatal(err)
	}
	for _, fl := range fleets {
		t.Run(fl.name, func(t *testing.T) {
			p := loadCompose(t, composeEnv, fl.files...)
			users := map[string]string{}
			for _, name := range p.ServiceNames() {
				s := p.Services[name]
				if !isHerald(s) {
					continue
				}
				u, err := url.Parse(*s.Environment["NATS_URL"])
				if err != nil || u.User == nil {
					t.Errorf("%s: NATS_URL without a user", name)
					continue
				}
				user := u.User.Username()
				pw, _ := u.User.Password()
				// The operator's two tools (herald, and pair for herald
				// pair) are one person's commands: one user.
				if other, dup := users[user]; dup && !(user == "operator" && slices.Contains(operatorTools, other) && slices.Contains(operatorTools, name)) {
					t.Errorf("%s and %s both connect as %s", other, name, user)
				}
				users[user] = name
				env := natsauth.PasswordEnv(user)
				if !slices.Contains(composeEnv, env+"="+pw) {
					t.Errorf("%s connects as %s with a password other than %s's", name, user, env)
				}
				if !strings.Contains(string(conf), fmt.Sprintf("user: %q\n        password: $%s\n", user, env)) {
					t.Errorf("%s connects as %s, which nats-secure.conf does not have with password $%s", name, user, env)
				}
			}
		})
	}
}

// TestComposePrometheus: deploy/prometheus.yml scrapes every long-running
// Herald service on the port it serves /metrics on, and nothing else.
func TestComposePrometheus(t *testing.T) {
	p := loadCompose(t, composeEnv, "compose.yaml")
	var prom struct {
		ScrapeConfigs []struct {
			JobName string `yaml:"job_name"`
			DNS     []struct {
				Names []string `yaml:"names"`
				Port  int      `yaml:"port"`
			} `yaml:"dns_sd_configs"`
		} `yaml:"scrape_configs"`
	}
	readYAML(t, filepath.Join(deployDir, "prometheus.yml"), &prom)
	scraped := map[string]int{}
	for _, sc := range prom.ScrapeConfigs {
		for _, d := range sc.DNS {
			for _, n := range d.Names {
				scraped[n] = d.Port
			}
		}
	}
	for _, name := range p.ServiceNames() {
		s := p.Services[name]
		if !isHerald(s) || slices.Contains(oneShots, name) {
			continue
		}
		_, port, _ := net.SplitHostPort(*s.Environment["HERALD_HTTP_LISTEN"])
		if got, ok := scraped[name]; !ok {
			t.Errorf("prometheus.yml does not scrape %s", name)
		} else if strconv.Itoa(got) != port {
			t.Errorf("prometheus.yml scrapes %s on port %d, it listens on %s", name, got, port)
		}
		delete(scraped, name)
	}
	for n := range scraped {
		t.Errorf("prometheus.yml scrapes %s, not a Herald service of compose.yaml", n)
	}
}

// TestComposeDashboard: the Grafana dashboard is valid JSON, asks for its
// Prometheus data source by variable, and every panel has a query. That
// its queries name only metrics and labels the services serve, and that
// every metric served is on a panel or in an alert, TestAlertsNameServedMetrics
// checks against a real scrape.
func TestComposeDashboard(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(deployDir, "grafana", "herald-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	type datasource struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	}
	var dash struct {
		Title  string `json:"title"`
		Panels []struct {
			Type       string      `json:"type"`
			Title      string      `json:"title"`
			Datasource *datasource `json:"datasource"`
			Targets    []struct {
				Expr       string      `json:"expr"`
				Datasource *datasource `json:"datasource"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Type       string      `json:"type"`
				Name       string      `json:"name"`
				Query      any         `json:"query"`
				Datasource *datasource `json:"datasource"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("herald-dashboard.json: %v", err)
	}
	dsVar := ""
	for _, v := range dash.Templating.List {
		if v.Type == "datasource" && v.Query == "prometheus" {
			dsVar = "${" + v.Name + "}"
		}
	}
	if dsVar == "" {
		t.Fatal("no Prometheus data source variable: the dashboard would be tied to one Grafana's data source")
	}
	checkDS := func(where string, ds *datasource) {
		if ds == nil || ds.Type != "prometheus" || ds.UID != dsVar {
			t.Errorf("%s: data source %+v, want prometheus %s", where, ds, dsVar)
		}
	}
	for _, v := range dash.Templating.List {
		if v.Type == "query" {
			checkDS("variable "+v.Name, v.Datasource)
		}
	}
	for _, p := range dash.Panels {
		if p.Type == "row" {
			continue
		}
		checkDS(p.Title, p.Datasource)
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			checkDS(p.Title, tg.Datasource)
		}
	}
}
