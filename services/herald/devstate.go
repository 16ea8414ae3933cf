package herald

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/services/process"
)

// DevStateFile is where a running `herald dev` records its fleet for the
// commands started next to it (`herald notify`, `pair`, `dead`, `token`,
// `log`): relative to the working directory, in the .herald/ that holds its
// NATS data and tokens by default. It is here whatever nats.store_dir says,
// since this is where those commands look.
const DevStateFile = ".herald/dev.json"

// DevState is what DevStateFile holds. It has no secrets: the tokens stay in
// their own files.
type DevState struct {
	// Config is the absolute path of the configuration file herald dev runs
	// with; "" is the built-in default fleet.
	Config string `json:"config"`
	// PID is herald dev's process id, so that only it removes the file.
	PID int `json:"pid"`
	// NATS is the embedded server's client URL (empty when the fleet uses
	// nats.url: the commands read that from the configuration).
	NATS string `json:"nats,omitempty"`
	// Butlers maps each butler's name to its MCP URL, as bound (a port 0 in
	// the configuration is the port it got).
	Butlers map[string]string `json:"butlers,omitempty"`
	// HTTP is the URL of its listener of /healthz, /readyz and /metrics,
	// as bound, for herald healthcheck.
	HTTP string `json:"http,omitempty"`
}

// recordDevState writes the state of the fleet o runs to o.StateFile, if
// set. A failure is logged, not returned: the fleet runs without it, and the
// commands then need --config.
func recordDevState(o DevOptions, ep Endpoints, log *slog.Logger) {
	if o.StateFile == "" {
		return
	}
	st := DevState{PID: os.Getpid(), Butlers: ep.Butlers, HTTP: ep.HTTP}
	if ep.Store != "" {
		st.NATS = ep.NATS
	}
	if o.ConfigFile != "" {
		abs, err := filepath.Abs(o.ConfigFile)
		if err != nil {
			log.Warn("herald dev state not recorded; other commands need --config", "err", err)
			return
		}
		st.Config = abs
	}
	if err := writeDevState(o.StateFile, st); err != nil {
		log.Warn("herald dev state not recorded; other commands need --config", "err", err)
	}
}

// writeDevState replaces path with st in one step, so a reader never sees
// half a file.
func writeDevState(path string, st DevState) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".dev-*.json")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // a no-op once renamed
	if _, err := f.Write(append(b, '\n')); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// forgetDevState removes path if this process wrote it; a newer herald dev's
// record is left alone.
func forgetDevState(path string) {
	if path == "" {
		return
	}
	if st, err := ReadDevState(path); err == nil && st != nil && st.PID == os.Getpid() {
		_ = os.Remove(path)
	}
}

// ReadDevState reads the state a herald dev recorded in path; nil (and no
// error) when there is none.
func ReadDevState(path string) (*DevState, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading herald dev's state: %w", err)
	}
	var st DevState
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("%s is not herald dev's state (%w); delete it, or give --config", path, err)
	}
	return &st, nil
}

// configSource says which configuration a command runs with, for errors
// that depend on it ("no butler health in ...").
type configSource string

// loadConfig is LoadConfig that also says where the configuration came from.
// The file path names (or HERALD_CONFIG) is pointed at where the herald dev
// running here listens when that dev runs with the same file.
func loadConfig(path string, getenv config.Getenv) (*config.Config, configSource, error) {
	if path == "" {
		path = getenv("HERALD_CONFIG")
	}
	if path != "" {
		cfg, err := process.LoadConfigFile(path, getenv)
		if err != nil {
			return nil, configSource(path), err
		}
		// The file a herald dev here runs with: where that fleet listens
		// (a port 0 is the one it got) is in its state, not in the file.
		if st, err := ReadDevState(DevStateFile); err == nil && st != nil && st.runs(path) {
			st.apply(cfg)
		}
		return cfg, configSource(path), nil
	}
	st, err := ReadDevState(DevStateFile)
	if err != nil {
		return nil, "", err
	}
	if st == nil {
		cfg, err := process.LoadConfigFile("", getenv)
		return cfg, "the default configuration (no --config or HERALD_CONFIG, and no herald dev running here)", err
	}
	src := configSource("the default configuration herald dev runs with (as " + DevStateFile + " records)")
	if st.Config != "" {
		src = configSource(st.Config + ", which herald dev runs with (as " + DevStateFile + " records)")
	}
	cfg, err := process.LoadConfigFile(st.Config, getenv)
	if err != nil {
		return nil, src, fmt.Errorf("%w (the configuration herald dev runs with, as %s records; give --config for another)", err, DevStateFile)
	}
	st.apply(cfg)
	return cfg, src, nil
}

// runs reports whether the herald dev st records runs with the file path
// (the same file, by whatever name) and still runs.
func (st *DevState) runs(path string) bool {
	if st.Config == "" {
		return false
	}
	a, err := os.Stat(path)
	if err != nil {
		return false
	}
	b, err := os.Stat(st.Config)
	return err == nil && os.SameFile(a, b) && alive(st.PID)
}

// alive reports whether process pid may still run: a record whose herald
// dev was killed outright (so could not remove it) names a dead one.
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	err = p.Signal(syscall.Signal(0))
	// EPERM: it runs, as another user.
	return err == nil || errors.Is(err, syscall.EPERM)
}

// apply points cfg at where the running fleet actually listens, which is
// the configuration's addresses unless those had port 0.
func (st *DevState) apply(cfg *config.Config) {
	if cfg.NATS.URL == "" && st.NATS != "" {
		cfg.NATS.URL = st.NATS
	}
	for i := range cfg.Butlers {
		if u, err := url.Parse(st.Butlers[cfg.Butlers[i].Name]); err == nil && u.Host != "" {
			cfg.Butlers[i].MCPHTTP = u.Host
		}
	}
}

// butlerNames lists cfg's butlers for an error message.
func butlerNames(cfg *config.Config) string {
	return strings.Join(cfg.ButlerNames(), ", ")
}
