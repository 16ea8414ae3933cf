//go:build compose

// Package compose drives the compose fleet of deploy/ in real containers
// (`make compose-test`): a Docker daemon of its own, the images of
// `make images`, `herald init` from the image, `docker compose up`, the
// operator's commands through the compose service herald (notify, log,
// status, reload) as docs/fleet.md gives them, and then what a user
// relies on, from the outside: notifies through a butler's published MCP
// port reach the log channel and a Telegram stand-in container, nothing is
// lost or doubled across a messenger restart, a killed switchboard and a
// killed NATS node of the 3-node cluster, a queued message survives
// `down`/`up`, and a new butler joins with `herald init`, `herald
// nats-auth` and `up -d`. docs/fleet.md is what this test does.
//
// TestMain starts dockerd with its own data root, exec root, socket and
// pidfile, --iptables=false and no default bridge; the fleet's network is a
// bridge named hrldct0 (compose.test.yaml), which two FORWARD rules let talk
// to itself and nowhere else. Everything is removed at the end, also when a
// test fails. A daemon that cannot start fails the run with its log.
//
// Needs root, dockerd, containerd and runc (Debian's docker.io), a docker
// CLI and Compose v2 as the file COMPOSE_PLUGIN (make compose-test builds it
// from the Go module proxy when it is missing).
package compose

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/testkit"
)

// bridge is the Linux bridge of the fleet's network (compose.test.yaml).
const bridge = "hrldct0"

// env is what every docker and compose command of the test gets.
var (
	dockerEnv []string
	// heraldBin is the herald binary built on the host, beside bin/butler
	// for docs/fleet.md's stdio recipe; the fleet's own herald commands run
	// from the image, as docs/fleet.md has them.
	heraldBin string
	repoRoot  string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) (code int) {
	fail := func(format string, a ...any) int {
		fmt.Fprintf(os.Stderr, "compose test: "+format+"\n", a...)
		return 1
	}
	var err error
	if repoRoot, err = filepath.Abs("../.."); err != nil {
		return fail("%v", err)
	}
	if os.Geteuid() != 0 {
		return fail("needs root: it starts its own dockerd and adds FORWARD rules for its bridge")
	}
	plugin := os.Getenv("COMPOSE_PLUGIN")
	if plugin == "" {
		return fail("COMPOSE_PLUGIN is not set: the path of a Compose v2 binary (make compose-test builds one)")
	}
	for _, bin := range []string{"dockerd", "docker", "iptables"} {
		if _, err := exec.LookPath(bin); err != nil {
			return fail("%s is not installed (apt-get install docker.io; make compose-test does it): %v", bin, err)
		}
	}
	// What an earlier run could not clean up (killed, or timed out).
	if out, err := exec.Command("sh", "cleanup.sh").CombinedOutput(); err != nil {
		return fail("cleaning up after an earlier run: %v\n%s", err, out)
	}
	// The fleet publishes fixed ports on 127.0.0.1: a fleet of the
	// developer's own would make compose fail with a less clear message.
	for _, port := range []string{"4222", "8222", "4223", "8223", "4224", "8224", "7701", "7702", "7703", "8787", "2525", "8081"} {
		l, err := net.Listen("tcp", "127.0.0.1:"+port)
		if err != nil {
			return fail("127.0.0.1:%s is taken (a compose fleet of your own? stop it first): %v", port, err)
		}
		_ = l.Close()
	}
	work, err := os.MkdirTemp("", "herald-compose-test-")
	if err != nil {
		return fail("%v", err)
	}
	// cleanup.sh finds it here if this run ends before its deferred calls.
	state := filepath.Join(os.TempDir(), "herald-compose-test.dir")
	if err := os.WriteFile(state, []byte(work), 0o600); err != nil {
		return fail("%v", err)
	}
	defer os.Remove(state)
	defer func() {
		if err := removeAll(work); err != nil {
			fmt.Fprintf(os.Stderr, "compose test: cleaning up %s: %v\n", work, err)
		}
	}()

	cfgDir := filepath.Join(work, "docker-config")
	if err := os.MkdirAll(filepath.Join(cfgDir, "cli-plugins"), 0o755); err != nil {
		return fail("%v", err)
	}
	if err := os.Symlink(plugin, filepath.Join(cfgDir, "cli-plugins", "docker-compose")); err != nil {
		return fail("%v", err)
	}
	sock := filepath.Join(work, "docker.sock")
	dockerEnv = append(os.Environ(),
		"DOCKER_HOST=unix://"+sock,
		"DOCKER_CONFIG="+cfgDir,
		// No pull can reach a registry: FROM scratch and the images built here only.
		"DOCKER_BUILDKIT=0",
		"COMPOSE_STATUS_STDOUT=1",
	)

	stop, err := startDaemon(work, sock)
	if err != nil {
		return fail("dockerd cannot start, so nothing was tested: %v", err)
	}
	defer stop()
	if err := forwardRules(true); err != nil {
		return fail("%v", err)
	}
	defer func() {
		if err := forwardRules(false); err != nil {
			fmt.Fprintf(os.Stderr, "compose test: %v\n", err)
			code = 1
		}
		// A bridge left behind by a failed down.
		_ = exec.Command("ip", "link", "delete", bridge).Run()
	}()

	start := time.Now()
	if out, err := cmd(context.Background(), repoRoot, "sh", "deploy/images.sh"); err != nil {
		return fail("make images: %v\n%s", err, out)
	} else {
		fmt.Printf("make images: %s\n%s", time.Since(start).Round(time.Second), out)
	}
	// herald for the host's commands, butler for docs/fleet.md's stdio recipe.
	heraldBin = filepath.Join(work, "bin", "herald")
	if out, err := cmd(context.Background(), repoRoot, "go", "build", "-o", filepath.Join(work, "bin")+"/", "./services/cmd/herald", "./services/cmd/butler"); err != nil {
		return fail("building herald and butler: %v\n%s", err, out)
	}
	if err := buildStandin(work); err != nil {
		return fail("%v", err)
	}
	return m.Run()
}

// startDaemon runs dockerd for this test only and waits until it answers.
// stop ends it (SIGTERM, then SIGKILL) and unmounts what it left.
func startDaemon(work, sock string) (stop func(), err error) {
	dataRoot := filepath.Join(work, "data")
	logPath := filepath.Join(work, "dockerd.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	d := exec.Command("dockerd",
		"--data-root", dataRoot,
		"--exec-root", filepath.Join(work, "exec"),
		"--pidfile", filepath.Join(work, "dockerd.pid"),
		"-H", "unix://"+sock,
		"--iptables=false", "--ip-masq=false", "--ip-forward=false",
		"--bridge=none",
		// Every name lookup and pull stays on the machine.
		"--dns", "127.0.0.1",
		"--containerd-namespace", "herald-compose-test",
		"--containerd-plugins-namespace", "herald-compose-test-plugins",
	)
	d.Env = append(os.Environ(), "HTTP_PROXY=http://127.0.0.1:9", "HTTPS_PROXY=http://127.0.0.1:9", "NO_PROXY=")
	d.Stdout, d.Stderr = logf, logf
	d.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := d.Start(); err != nil {
		_ = logf.Close()
		return nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- d.Wait() }()
	stop = func() {
		_ = d.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-d.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		_ = logf.Close()
		unmountUnder(work)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case err := <-exited:
			_ = logf.Close()
			return nil, fmt.Errorf("dockerd exited (%v):\n%s", err, testkit.Tail(logPath, 15))
		default:
		}
		if out, err := cmd(context.Background(), "", "docker", "version", "--format", "{{.Server.Version}}"); err == nil {
			fmt.Printf("dockerd %s (data root %s)\n", strings.TrimSpace(string(out)), dataRoot)
			return stop, nil
		}
		if time.Now().After(deadline) {
			stop()
			return nil, fmt.Errorf("dockerd did not answer within a minute:\n%s", testkit.Tail(logPath, 15))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// forwardRules adds (or removes) the two FORWARD rules of the fleet's
// bridge: its containers may talk to each other, and nothing is forwarded
// between it and anywhere else (with bridge-nf-call-iptables=1 the host's
// FORWARD chain sees bridged traffic; its policy may be DROP or ACCEPT).
// Published ports go through docker-proxy on the host, not FORWARD.
func forwardRules(add bool) error {
	rules := [][]string{
		{"-i", bridge, "-o", bridge, "-j", "ACCEPT"},
		{"-i", bridge, "-j", "DROP"},
		{"-o", bridge, "-j", "DROP"},
	}
	var errs []error
	for i, r := range rules {
		var args []string
		if add {
			args = append([]string{"-I", "FORWARD", fmt.Sprint(i + 1)}, r...)
		} else {
			args = append([]string{"-D", "FORWARD"}, r...)
		}
		if out, err := exec.Command("iptables", args...).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("iptables %s: %v: %s", strings.Join(args, " "), err, out))
		}
	}
	return errors.Join(errs...)
}

// buildStandin builds the Telegram stand-in (e2e/cmd/telegram-standin)
// into the image herald-telegram-standin:test, FROM scratch.
func buildStandin(work string) error {
	ctxDir := filepath.Join(work, "standin")
	if err := os.MkdirAll(ctxDir, 0o755); err != nil {
		return err
	}
	build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", filepath.Join(ctxDir, "telegram-standin"), "./cmd/telegram-standin")
	build.Dir = filepath.Join(repoRoot, "e2e")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("building the Telegram stand-in: %v\n%s", err, out)
	}
	df := "FROM scratch\nCOPY telegram-standin /telegram-standin\nUSER 65532:65532\nENTRYPOINT [\"/telegram-standin\"]\n"
	if err := os.WriteFile(filepath.Join(ctxDir, "Dockerfile"), []byte(df), 0o644); err != nil {
		return err
	}
	if out, err := cmd(context.Background(), ctxDir, "docker", "build", "-q", "-t", standinImage, "."); err != nil {
		return fmt.Errorf("building %s: %v\n%s", standinImage, err, out)
	}
	return nil
}

const standinImage = "herald-telegram-standin:test"

// cmd runs a command with the test's Docker environment in dir and returns
// its combined output.
func cmd(ctx context.Context, dir, name string, args ...string) ([]byte, error) {
	c := exec.CommandContext(ctx, name, args...)
	c.Dir = dir
	c.Env = dockerEnv
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	err := c.Run()
	return out.Bytes(), err
}

// unmountUnder detaches every mount dockerd may have left under dir.
func unmountUnder(dir string) {
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return
	}
	lines := strings.Split(string(b), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		f := strings.Fields(lines[i])
		if len(f) > 1 && strings.HasPrefix(f[1], dir+"/") {
			_ = syscall.Unmount(f[1], syscall.MNT_DETACH)
		}
	}
}

func removeAll(dir string) error {
	unmountUnder(dir)
	return os.RemoveAll(dir)
}

// httpGet is a GET with a short timeout.
func httpGet(url string) (*http.Response, error) {
	c := &http.Client{Timeout: 5 * time.Second}
	return c.Get(url)
}
