package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/herald"
)

// devProc is `herald dev` as users run it: bin/herald in a process of its
// own, in a directory of its own (its .herald/ with the NATS store, the
// butlers' tokens and dev.json), so that its memory is its own and measured
// from /proc.
type devProc struct {
	b       testing.TB
	name    string
	dir     string
	cmd     *exec.Cmd
	started time.Time
	upIn    time.Duration // from exec to the banner's last line
	state   *herald.DevState
	nc      *nats.Conn
	js      jetstream.JetStream
	logs    *arrivals // the log channel's records (logger llm_notify)
	pprof   string    // the process's profiler address, when profiling
	natsURL string    // the NATS it was given, if not its embedded server
	env     []string
	exited  chan struct{}

	// startProfiled is closed once the profile of the start is under way
	// (startWait waits for it to be written), or will not be taken.
	startProfiled chan struct{}
	startWait     func()

	mu   sync.Mutex
	tail []string // its last lines of log, for when it fails
}

// heraldBin is the herald binary the benchmark runs: HERALD_BIN (make bench
// sets it to bin/herald, built first), else one built once from this tree.
var heraldBin = sync.OnceValues(func() (string, error) {
	if p := os.Getenv("HERALD_BIN"); p != "" {
		return p, nil
	}
	return goBuild("github.com/heraldhq/herald/services/cmd/herald")
})

// built are the directories goBuild made, removed when the tests end.
var built struct {
	sync.Mutex
	dirs []string
}

// TestMain runs the package's tests and benchmarks, then removes the
// binaries goBuild made for them.
func TestMain(m *testing.M) {
	code := m.Run()
	built.Lock()
	for _, dir := range built.dirs {
		_ = os.RemoveAll(dir)
	}
	built.Unlock()
	os.Exit(code)
}

// goBuild builds the command pkg into a directory of its own and returns the
// binary's path.
func goBuild(pkg string) (string, error) { return goBuildAs(pkg, path.Base(pkg)) }

// goBuildAs is goBuild with the binary named name.
func goBuildAs(pkg, name string) (string, error) {
	dir, err := os.MkdirTemp("", "herald-bench-"+name+"-")
	if err != nil {
		return "", err
	}
	built.Lock()
	built.dirs = append(built.dirs, dir)
	built.Unlock()
	out := filepath.Join(dir, name)
	if b, err := exec.Command("go", "build", "-o", out, pkg).CombinedOutput(); err != nil {
		return "", fmt.Errorf("building %s: %v\n%s", name, err, b)
	}
	return out, nil
}

// startDev starts herald dev with the configuration yaml in a directory of
// its own and waits until it prints its banner (every butler listening). env
// is added to a clean environment: nothing of the caller's HERALD_* or
// NATS_URL leaks in. When profiling, a profile of the first profileStart (if
// any) is taken from the moment the process's profiler answers:
// waitStartProfile waits for it.
func startDev(b testing.TB, t *table, name, yaml string, profileStart time.Duration, env ...string) *devProc {
	b.Helper()
	return startDevOn(b, t, name, yaml, "", profileStart, env...)
}

// startDevOn is startDev for a configuration whose nats.url is natsURL (a
// cluster of the benchmark's): herald dev records the URL of its embedded
// server only, so the benchmark connects to natsURL itself.
func startDevOn(b testing.TB, t *table, name, yaml, natsURL string, profileStart time.Duration, env ...string) *devProc {
	b.Helper()
	p := &devProc{b: b, name: name, dir: b.TempDir(), logs: newArrivals(), natsURL: natsURL}
	if err := os.WriteFile(filepath.Join(p.dir, "herald.yaml"), []byte(yaml), 0o600); err != nil {
		b.Fatal(err)
	}
	p.env = env
	if benchProfiles != "" {
		p.pprof = testkit.FreeAddr(b)
		p.env = append(p.env, herald.PprofEnv+"="+p.pprof)
	}
	p.launch(t, "start", profileStart)
	return p
}

// restart stops the process and starts it again on the same directory (its
// NATS store, tokens and consumers kept), as a second `make run` does.
func (p *devProc) restart(t *table, profileStart time.Duration) {
	p.b.Helper()
	p.stop()
	p.nc.Close()
	p.launch(t, "restart", profileStart)
}

func (p *devProc) launch(t *table, phase string, profileStart time.Duration) {
	b := p.b
	b.Helper()
	bin, err := heraldBin()
	if err != nil {
		b.Fatal(err)
	}
	p.exited, p.startProfiled, p.startWait = make(chan struct{}), make(chan struct{}), func() {}
	p.cmd = exec.Command(bin, "dev", "--config", filepath.Join(p.dir, "herald.yaml"))
	p.cmd.Dir = p.dir
	p.cmd.Env = append(cleanEnv(), p.env...)
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	p.started = time.Now()
	if err := p.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	go p.readLog(stderr)
	banner, upIn := make(chan struct{}), make(chan time.Duration, 1)
	if p.pprof != "" && profileStart > 0 {
		go p.profileStart(t, phase, profileStart, banner)
	} else {
		close(p.startProfiled)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "Stop:") {
				upIn <- time.Since(p.started)
				close(banner)
				break
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	exited := p.exited
	go func() { _ = p.cmd.Wait(); close(exited) }()
	b.Cleanup(p.stop)
	select {
	case p.upIn = <-upIn:
	case <-p.exited:
		b.Fatalf("herald dev (%s) exited before it was up:\n%s", p.name, p.lastLines())
	case <-time.After(2 * time.Minute):
		b.Fatalf("herald dev (%s) not up after 2 minutes:\n%s", p.name, p.lastLines())
	}
	if p.state, err = herald.ReadDevState(filepath.Join(p.dir, herald.DevStateFile)); err != nil || p.state == nil {
		b.Fatalf("herald dev (%s) recorded no state: %v", p.name, err)
	}
	url := p.state.NATS
	if p.natsURL != "" {
		url = p.natsURL
	}
	if p.nc, err = nats.Connect(url, nats.Name("herald-bench")); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(p.nc.Close)
	if p.js, err = jetstream.New(p.nc); err != nil {
		b.Fatal(err)
	}
}

// profileStart takes a profile of the process's first d from the moment its
// profiler answers.
func (p *devProc) profileStart(t *table, phase string, d time.Duration, banner <-chan struct{}) {
	defer close(p.startProfiled)
	for time.Since(p.started) < 2*time.Minute {
		if c, err := net.Dial("tcp", p.pprof); err == nil {
			c.Close()
			wait := p.profile(t, phase, d)
			p.mu.Lock()
			p.startWait = wait
			p.mu.Unlock()
			return
		}
		select {
		case <-banner:
			t.note("herald dev (%s) serves no profiler: is services/herald's servePprof called from Dev?", p.name)
			return
		case <-p.exited:
			return
		default:
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitStartProfile waits until the profile of the start is written.
func (p *devProc) waitStartProfile() {
	<-p.startProfiled
	p.mu.Lock()
	wait := p.startWait
	p.mu.Unlock()
	wait()
}

// readLog follows the process's log: the log channel's records go to the
// ledger; the last lines are kept for error messages.
func (p *devProc) readLog(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, "logger=llm_notify") {
			p.logs.note(line, time.Now())
			continue
		}
		p.mu.Lock()
		if p.tail = append(p.tail, line); len(p.tail) > 40 {
			p.tail = p.tail[1:]
		}
		p.mu.Unlock()
	}
}

func (p *devProc) lastLines() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.tail, "\n")
}

// stop interrupts the process, as Ctrl-C does, and waits for it to stop.
func (p *devProc) stop() {
	if p.cmd.Process == nil {
		return
	}
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		p.b.Logf("herald dev (%s) did not stop in 30s; killed", p.name)
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// memory is the process's resident set now (VmRSS) and at its peak (VmHWM).
func (p *devProc) memory() (rss, peak uint64) {
	rss, peak, _ = procMemory(p.b, p.cmd.Process.Pid)
	return rss, peak
}

// procMemory is process pid's resident set now, its peak so far, and how
// much of it now is files mapped (RssFile: the binary's code and read-only
// data, as the kernel pages them in).
func procMemory(b testing.TB, pid int) (rss, peak, files uint64) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Logf("reading the memory of process %d: %v", pid, err)
		return 0, 0, 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmRSS":
			rss = kb << 10
		case "VmHWM":
			peak = kb << 10
		case "RssFile":
			files = kb << 10
		}
	}
	return rss, peak, files
}

// token is herald dev's bearer token for butler (the one it made on first
// start in .herald/tokens/, as the README says).
func (p *devProc) token(butler string) string {
	b, err := os.ReadFile(filepath.Join(p.dir, ".herald", "tokens", butler+".token"))
	if err != nil {
		p.b.Fatalf("herald dev's token for %s: %v", butler, err)
	}
	return strings.TrimSpace(string(b))
}

// profile, when profiling, takes a CPU profile and a profile of what was
// allocated over the next d, named name, in the background; the returned
// wait blocks until both are written.
func (p *devProc) profile(t *table, name string, d time.Duration) (wait func()) {
	if p.pprof == "" {
		return func() {}
	}
	secs := strconv.Itoa(int(d.Round(time.Second).Seconds()))
	var wg sync.WaitGroup
	for kind, path := range map[string]string{"cpu": "/debug/pprof/profile?seconds=" + secs, "allocs": "/debug/pprof/allocs?seconds=" + secs} {
		wg.Go(func() {
			file := filepath.Join(benchProfiles, fmt.Sprintf("herald-%s-%s.%s.pprof", p.name, name, kind))
			if err := fetch("http://"+p.pprof+path, file); err != nil {
				t.note("profile %s not taken: %v (is services/herald's servePprof called from Dev?)", file, err)
			}
		})
	}
	return wg.Wait
}

// heapProfile writes the process's in-use heap now.
func (p *devProc) heapProfile(t *table, name string) {
	if p.pprof == "" {
		return
	}
	file := filepath.Join(benchProfiles, fmt.Sprintf("herald-%s-%s.heap.pprof", p.name, name))
	if err := fetch("http://"+p.pprof+"/debug/pprof/heap?gc=1", file); err != nil {
		t.note("profile %s not taken: %v", file, err)
	}
}

func fetch(url, file string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// cleanEnv is the environment of the herald process: shellEnv, plus
// BENCH_HERALD_ENV ("GOGC=50 GOMEMLIMIT=64MiB", say), so that the Go
// runtime's knobs can be tried on herald dev without turning them on the
// benchmark's own process too.
func cleanEnv() []string {
	return append(shellEnv(), strings.Fields(os.Getenv("BENCH_HERALD_ENV"))...)
}

// shellEnv is what a shell gives any program of the caller's environment.
func shellEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "PATH", "HOME", "TMPDIR", "LANG", "USER":
			env = append(env, kv)
		}
	}
	return env
}
