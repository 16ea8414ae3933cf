package herald_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/heraldhq/herald/services/herald"
)

const initConfig = `nats: { url: nats://nats:4222 }
butlers:
  - { name: health, mcp_http: 0.0.0.0:7701, mcp_token_env: HEALTH_MCP_TOKEN, allowed_hosts: [butler-health] }
integrations:
  - { id: tg_main, type: telegram, token_env: TELEGRAM_BOT_TOKEN, default_chat: "1", grants: all }
  - { id: mail, type: email, smtp_url_env: SMTP_URL, from: h@example.com, default_to: me@example.com, grants: all }
`

const gardenButler = `  - { name: garden, mcp_http: 0.0.0.0:7703, mcp_token_env: GARDEN_MCP_TOKEN, allowed_hosts: [butler-garden] }
`

func runInit(t *testing.T, cfg string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errs bytes.Buffer
	code = herald.Main(t.Context(), []string{"init", "--config", cfg}, herald.IO{Getenv: func(string) string { return "" }, Stdout: &out, Stderr: &errs})
	return out.String(), errs.String(), code
}

// readEnv parses a .env file into its variables.
func readEnv(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{}
	for line := range strings.Lines(string(b)) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, _ := strings.Cut(line, "=")
		if _, dup := vars[k]; dup {
			t.Errorf("%s defined twice", k)
		}
		vars[k] = v
	}
	return vars
}

// TestInit: herald init writes the secrets of the fleet of herald.yaml, with
// mode 0600, and the butlers' compose services.
func TestInit(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "herald.yaml")
	writeFile(t, cfg, initConfig)
	if out, errs, code := runInit(t, cfg); code != 0 {
		t.Fatalf("herald init: exit %d\n%s%s", code, out, errs)
	}
	envPath := filepath.Join(dir, ".env")
	st, err := os.Stat(envPath)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf(".env has mode %v, want 0600: it holds every secret", st.Mode().Perm())
	}
	env := readEnv(t, envPath)
	for _, k := range []string{"HEALTH_MCP_TOKEN", "HERALD_NATS_SWITCHBOARD_PASSWORD", "HERALD_NATS_MESSENGER_PASSWORD",
		"HERALD_NATS_BUTLER_HEALTH_PASSWORD", "HERALD_NATS_OPERATOR_PASSWORD", "HERALD_NATS_SETUP_PASSWORD"} {
		if len(env[k]) < 32 {
			t.Errorf("%s = %q, want a random secret of 32 characters or more", k, env[k])
		}
	}
	if env["HEALTH_MCP_TOKEN"] == env["HERALD_NATS_SETUP_PASSWORD"] {
		t.Error("two secrets are the same")
	}
	// Provider secrets are placeholders, with a comment saying what goes there.
	raw, _ := os.ReadFile(envPath)
	for _, k := range []string{"TELEGRAM_BOT_TOKEN", "SMTP_URL"} {
		if v, ok := env[k]; !ok || v != "" {
			t.Errorf("%s = %q (present %v), want an empty placeholder", k, v, ok)
		}
		if !strings.Contains(string(raw), "# integration ") || !strings.Contains(string(raw), k+"=\n") {
			t.Errorf(".env has no commented placeholder for %s:\n%s", k, raw)
		}
	}
	compose, err := os.ReadFile(filepath.Join(dir, "compose.butlers.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"butler-health:", `command: ["butler", "--name", "health"]`,
		"nats://butler-health:${HERALD_NATS_BUTLER_HEALTH_PASSWORD:?run herald init}@nats:4222",
		"HEALTH_MCP_TOKEN: ${HEALTH_MCP_TOKEN:?run herald init}", `"${HERALD_BIND:-127.0.0.1}:7701:7701"`} {
		if !strings.Contains(string(compose), want) {
			t.Errorf("compose.butlers.yaml lacks %q:\n%s", want, compose)
		}
	}
}

// TestInitNeverOverwrites: run again, herald init keeps every value (an
// operator's own included) and, after a butler was added, adds that
// butler's token and NATS password only.
func TestInitNeverOverwrites(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "herald.yaml")
	envPath := filepath.Join(dir, ".env")
	writeFile(t, cfg, initConfig)
	// An operator's .env from before, readable by all: kept, and narrowed.
	if err := os.WriteFile(envPath, []byte("TELEGRAM_BOT_TOKEN=123:mine\nHEALTH_MCP_TOKEN=operator-chosen-token-of-enough-length"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, errs, code := runInit(t, cfg); code != 0 {
		t.Fatalf("herald init: exit %d\n%s%s", code, out, errs)
	}
	first := readEnv(t, envPath)
	if first["TELEGRAM_BOT_TOKEN"] != "123:mine" || first["HEALTH_MCP_TOKEN"] != "operator-chosen-token-of-enough-length" {
		t.Errorf("herald init changed the operator's values: %v", first)
	}
	if st, _ := os.Stat(envPath); st.Mode().Perm() != 0o600 {
		t.Errorf("an existing .env keeps mode %v, want 0600", st.Mode().Perm())
	}

	if out, _, code := runInit(t, cfg); code != 0 || !strings.Contains(out, "nothing added") {
		t.Errorf("second run: exit %d, %q; want nothing added", code, out)
	}
	if again := readEnv(t, envPath); !equalMaps(again, first) {
		t.Errorf("a second run changed .env:\nbefore %v\nafter  %v", first, again)
	}

	writeFile(t, cfg, strings.Replace(initConfig, "integrations:\n", gardenButler+"integrations:\n", 1))
	out, errs, code := runInit(t, cfg)
	if code != 0 {
		t.Fatalf("herald init after adding garden: exit %d\n%s%s", code, out, errs)
	}
	after := readEnv(t, envPath)
	var added []string
	for k, v := range after {
		if old, ok := first[k]; !ok {
			added = append(added, k)
		} else if old != v && k != "HERALD_CONFIG_REVISION" {
			t.Errorf("%s changed", k)
		}
	}
	slices.Sort(added)
	if want := []string{"GARDEN_MCP_TOKEN", "HERALD_NATS_BUTLER_GARDEN_PASSWORD"}; !slices.Equal(added, want) {
		t.Errorf("added %v, want %v", added, want)
	}
	if after["HERALD_CONFIG_REVISION"] == first["HERALD_CONFIG_REVISION"] {
		t.Error("HERALD_CONFIG_REVISION did not change with herald.yaml: up -d would not recreate the services")
	}
	compose, _ := os.ReadFile(filepath.Join(dir, "compose.butlers.yaml"))
	if !strings.Contains(string(compose), "butler-garden:") {
		t.Errorf("compose.butlers.yaml has no butler-garden:\n%s", compose)
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestInitBadConfig: a herald.yaml with errors is reported, and nothing is
// written.
func TestInitBadConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "herald.yaml")
	writeFile(t, cfg, strings.Replace(initConfig, "grants: all }\n  - { id: mail", "grants: [nobody] }\n  - { id: mail", 1)+"bogus_key: 1\n")
	_, errs, code := runInit(t, cfg)
	if code == 0 {
		t.Fatal("herald init accepted a herald.yaml with errors")
	}
	if !strings.Contains(errs, "bogus_key") || !strings.Contains(errs, "nothing was written") {
		t.Errorf("stderr %q: want the error named and that nothing was written", errs)
	}
	for _, f := range []string{".env", "compose.butlers.yaml"} {
		if _, err := os.Stat(filepath.Join(dir, f)); !os.IsNotExist(err) {
			t.Errorf("%s exists after a failed herald init", f)
		}
	}
}

// TestButlersComposeIsGenerated: deploy/compose.butlers.yaml is exactly what
// `herald init` writes for deploy/herald.yaml, so compose.yaml includes the
// butlers the configuration has. After adding a butler:
//
//	bin/herald init --config deploy/herald.yaml
func TestButlersComposeIsGenerated(t *testing.T) {
	dir := t.TempDir()
	b, err := os.ReadFile("../../deploy/herald.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "herald.yaml")
	writeFile(t, cfg, string(b))
	if out, errs, code := runInit(t, cfg); code != 0 {
		t.Fatalf("herald init: exit %d\n%s%s", code, out, errs)
	}
	want, err := os.ReadFile(filepath.Join(dir, "compose.butlers.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	have, err := os.ReadFile("../../deploy/compose.butlers.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(have, want) {
		t.Fatal("deploy/compose.butlers.yaml differs from what `herald init --config deploy/herald.yaml` writes; run it")
	}
}

// TestInitSecretsStayOutOfGit: in a folder with deploy/.gitignore, what
// herald init writes is as git sees it: .env (every secret) and the
// temporary file it is written through ignored, the compose file and
// herald.yaml to commit.
func TestInitSecretsStayOutOfGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed: " + err.Error())
	}
	dir := t.TempDir()
	gitignore, err := os.ReadFile(filepath.Join("..", "..", "deploy", ".gitignore"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, ".gitignore"), string(gitignore))
	cfg := filepath.Join(dir, "herald.yaml")
	writeFile(t, cfg, initConfig)
	git := func(args ...string) (string, error) {
		cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := git("init", "-q"); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	if out, errs, code := runInit(t, cfg); code != 0 {
		t.Fatalf("herald init: exit %d\n%s%s", code, out, errs)
	}
	out, err := git("status", "--porcelain", "--ignored", "--untracked-files=all")
	if err != nil {
		t.Fatalf("git status: %v\n%s", err, out)
	}
	if want := "?? .gitignore\n?? compose.butlers.yaml\n?? herald.yaml\n!! .env\n"; out != want {
		t.Errorf("git status after herald init:\n%swant:\n%s", out, want)
	}
	// The name os.CreateTemp gives herald init's temporary .env, and a
	// NATS credentials file.
	for _, name := range []string{".env.herald-init-1234567890", "butler-health.creds"} {
		if out, err := git("check-ignore", name); err != nil {
			t.Errorf("%s is not ignored: %v %s", name, err, out)
		}
	}
}
