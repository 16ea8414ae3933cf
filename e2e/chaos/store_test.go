//go:build chaos

package chaos

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// serviceNames are the fleet's Herald processes, each with a /readyz.
var serviceNames = []string{"switchboard", "messenger", "butler"}

// mountStore puts a server's store on a tmpfs of size, so that a scenario
// can fill it; cleanup unmounts it. Mounting needs root: where it fails the
// scenario is skipped, with the reason in the output and the table.
func (f *fleet) mountStore(n *natsNode, size string) {
	if err := os.MkdirAll(n.store, 0o755); err != nil {
		f.fatalf("%v", err)
	}
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", n.store).CombinedOutput()
	if err != nil {
		msg := fmt.Sprintf("cannot put %s's store on a tmpfs (mount -t tmpfs -o size=%s needs root): %v: %s", n.name, size, err, strings.TrimSpace(string(out)))
		f.res.setSkipped(msg)
		f.t.Skip(msg)
	}
	f.mounts = append(f.mounts, n.store)
	f.note("%s's store is a %s tmpfs: %s", n.name, size, n.store)
}

// unmount unmounts a tmpfs store once its server is gone, detaching it
// (umount -l) if it stays busy, so the work directory can be removed.
func (f *fleet) unmount(dir string) {
	var (
		out []byte
		err error
	)
	for range 20 {
		if out, err = exec.Command("umount", dir).CombinedOutput(); err == nil {
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
	if lazy, lerr := exec.Command("umount", "-l", dir).CombinedOutput(); lerr != nil {
		f.t.Errorf("the tmpfs %s is still mounted: umount: %v: %s; umount -l: %v: %s", dir, err, strings.TrimSpace(string(out)), lerr, strings.TrimSpace(string(lazy)))
	}
}

// fill writes a ballast file at path until its file system is full
// (ENOSPC), and returns how many bytes it holds.
func fill(path string) (written int64, err error) {
	file, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	defer func() {
		if cerr := file.Close(); err == nil && cerr != nil && !errors.Is(cerr, syscall.ENOSPC) {
			err = cerr
		}
	}()
	buf := make([]byte, 1<<20)
	// Megabytes, then pages for what is left.
	for _, size := range []int{len(buf), 4096} {
		for {
			n, err := file.Write(buf[:size])
			written += int64(n)
			if errors.Is(err, syscall.ENOSPC) {
				break
			}
			if err != nil {
				return written, err
			}
		}
	}
	return written, nil
}

// readiness is one /readyz answer.
type readiness struct {
	status int
	checks map[string]string
	err    error // no answer
}

func (r readiness) String() string {
	if r.err != nil {
		return r.err.Error()
	}
	var failing []string
	for name, v := range r.checks {
		if v != "ok" {
			failing = append(failing, fmt.Sprintf("%s: %q", name, v))
		}
	}
	sort.Strings(failing)
	if len(failing) == 0 {
		return fmt.Sprintf("%d, every check ok", r.status)
	}
	return fmt.Sprintf("%d, %s", r.status, strings.Join(failing, ", "))
}

// storeFailing: 503 with the nats.store check failing.
func storeFailing(r readiness) bool {
	v, ok := r.checks["nats.store"]
	return r.err == nil && r.status == http.StatusServiceUnavailable && ok && v != "ok"
}

// ready: 200.
func ready(r readiness) bool { return r.err == nil && r.status == http.StatusOK }

// readyz asks a service's /readyz: the butler's on its MCP listener, the
// others' on their HERALD_HTTP_LISTEN.
func (f *fleet) readyz(name string) readiness {
	addr := f.svc[name].httpAddr
	if name == "butler" {
		addr = f.mcpAddr
	}
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + addr + "/readyz")
	if err != nil {
		return readiness{err: err}
	}
	defer resp.Body.Close()
	var body struct {
		Checks map[string]string `json:"checks"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return readiness{err: fmt.Errorf("%s, body not JSON: %w", resp.Status, err)}
	}
	return readiness{status: resp.StatusCode, checks: body.Checks}
}

// awaitReadiness polls every service's /readyz until each answer is want,
// or within passes; it notes how soon each service got there and records a
// violation, naming its last answer, for each that did not.
func (f *fleet) awaitReadiness(what string, want func(readiness) bool, since time.Time, within time.Duration) {
	deadline := time.Now().Add(within)
	took := map[string]time.Duration{}
	last := map[string]readiness{}
	for {
		for _, name := range serviceNames {
			if _, done := took[name]; done {
				continue
			}
			r := f.readyz(name)
			last[name] = r
			if want(r) {
				took[name] = time.Since(since)
			}
		}
		if len(took) == len(serviceNames) || time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	var got []string
	for _, name := range serviceNames {
		if d, ok := took[name]; ok {
			got = append(got, fmt.Sprintf("%s after %s (%s)", name, d.Round(100*time.Millisecond), last[name]))
			continue
		}
		f.res.violate("%s /readyz: not %s within %s: %s", name, what, within, last[name])
	}
	if len(got) > 0 {
		f.note("/readyz %s: %s", what, strings.Join(got, "; "))
	}
}

// noteReadiness notes what every service's /readyz says now.
func (f *fleet) noteReadiness(when string) {
	var now []string
	for _, name := range serviceNames {
		now = append(now, fmt.Sprintf("%s %s", name, f.readyz(name)))
	}
	f.note("/readyz %s: %s", when, strings.Join(now, "; "))
}

// counter sums a counter's samples (every label set) on a service's
// /metrics; found is false if the service does not export it.
func (f *fleet) counter(name, metric string) (sum float64, found bool, err error) {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + f.svc[name].httpAddr + "/metrics")
	if err != nil {
		return 0, false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		return 0, false, fmt.Errorf("%s: %s", resp.Status, b)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), metric)
		if !ok || rest == "" || rest[0] != ' ' && rest[0] != '{' {
			continue
		}
		if rest[0] == '{' {
			if end := strings.LastIndexByte(rest, '}'); end >= 0 {
				rest = rest[end+1:]
			}
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return 0, false, fmt.Errorf("%s: %q: %w", metric, sc.Text(), err)
		}
		sum += v
		found = true
	}
	return sum, found, sc.Err()
}
