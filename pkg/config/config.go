// Package config loads and checks herald.yaml, the one configuration file of a
// Herald fleet (architecture.md §6). Secrets never live in the file itself: it names the
// environment variables or files that hold them, and Secret resolves them.
// An integration's keys of its channel type, their checks and what the type
// can do are that channel's, in pkg/channel's table (ChannelOf): this package
// decodes them and places their mistakes on their lines, and holds no
// channel's keys itself.
package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/heraldhq/herald/pkg/channel/spec"
	"github.com/heraldhq/herald/schemas"
)

// ErrInvalid is wrapped by every error that Load, Parse and Validate return for a
// configuration that cannot be used as written.
var ErrInvalid = errors.New("invalid configuration")

// Defaults, in one place.
const (
	DefaultButlerName      = "assistant"
	DefaultMaxContentChars = 16000
	DefaultMCPHTTP         = "127.0.0.1:7701"
	DefaultNotifyTimeout   = 30 * time.Second
	LogIntegrationID       = "log"
	// HeraldOrigin is the origin_butler of the messages Herald sends on its
	// own (pairing codes, claim answers). A butler of that name would read
	// their ledger records and answers, so it is reserved.
	HeraldOrigin = "herald"
)

// ChannelTypes are the channel types a notify may name, in the order error
// messages list them: notify.v1's, the contract.
var ChannelTypes = schemas.ChannelTypes

var (
	namePattern = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,62}$`)
	// ReservedButlerNames are names Herald itself uses where butler names
	// go; no butler may take one.
	ReservedButlerNames = []string{HeraldOrigin}
	// Integration ids, generated ones such as int_gXuDla4UZipcm2tg3McPX too.
	// ASCII spelled out: (?i) would fold in ſ and K (architecture.md §10).
	idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$`)
)

// Config is herald.yaml.
type Config struct {
	NATS            NATS          `yaml:"nats"`
	DefaultButler   string        `yaml:"default_butler"`
	MaxContentChars int           `yaml:"max_content_chars"`
	NotifyTimeout   Duration      `yaml:"notify_timeout"`
	Butlers         []Butler      `yaml:"butlers"`
	Integrations    []Integration `yaml:"integrations"`
	Bindings        []Binding     `yaml:"bindings"`
	Delivery        Delivery      `yaml:"delivery"`
	// Channels is whether and how fast butlers push inbound messages to
	// their MCP clients as channel notifications (channels.go).
	Channels Channels `yaml:"channels"`
	// Approvals is how long permission prompts stay open (approvals.go).
	Approvals Approvals `yaml:"approvals"`
	// HTTPListen is host:port of the HTTP listener for webhooks and Slack's
	// Events API (POST /hooks/<id>, /slack/<id>/events), /healthz, /readyz
	// and /metrics (HERALD_HTTP_LISTEN overrides it). Unset, each kind of
	// process has its own default, so separate binaries on one host do not
	// collide (HTTPListenFor).
	HTTPListen string `yaml:"http_listen"`
	// ReadyWhenDegraded: a process with a part that cannot work (an
	// integration whose secret is missing) stays ready, naming the part
	// under "degraded" in /readyz, instead of answering 503. Off by default:
	// a deployment should not count such a process healthy unless the
	// operator chose so.
	ReadyWhenDegraded bool `yaml:"ready_when_degraded"`
	// PublicURL is where people reach http_listen from outside, such as
	// https://herald.example.com: a note that must be seen, mailed, then
	// carries a link to acknowledge it (attention.go). Unset: no links.
	PublicURL string `yaml:"public_url"`
	// WatchConfig: the process reloads this file whenever it changes (it
	// always does on SIGHUP and `herald reload`). Unset is on in herald dev
	// and off in a fleet's services (WatchesConfig).
	WatchConfig *bool `yaml:"watch_config"`
	// Transcribe turns voice notes into text before they reach the model
	// (transcribe.go); unset, they arrive as attachments.
	Transcribe *Transcribe `yaml:"transcribe"`
}

// WatchesConfig is watch_config, or def where the file does not set it.
func (c *Config) WatchesConfig(def bool) bool {
	if c.WatchConfig == nil {
		return def
	}
	return *c.WatchConfig
}

// DefaultHTTPListen is http_listen's default in herald dev, which runs
// every part in one process.
const DefaultHTTPListen = "127.0.0.1:8790"

// Default HTTP listeners of the fleet's separate binaries (HTTPListenFor):
// one port per kind of process, so a switchboard and a messenger on one
// host do not collide. A butler has none by default: its MCP listener
// serves its /healthz and /readyz, and each butler has its own.
const (
	DefaultSwitchboardHTTPListen = "127.0.0.1:8791"
	DefaultMessengerHTTPListen   = "127.0.0.1:8792"
)

// HTTPListenFor is where a process of the kind role ("dev",
// "switchboard", "messenger", "butler") serves HTTP: http_listen (or
// HERALD_HTTP_LISTEN), else that kind's default; "" for a butler, which
// then serves /healthz and /readyz on its MCP listener alone.
func (c *Config) HTTPListenFor(role string) string {
	if c.HTTPListen != "" {
		return c.HTTPListen
	}
	switch role {
	case "switchboard":
		return DefaultSwitchboardHTTPListen
	case "messenger":
		return DefaultMessengerHTTPListen
	case "butler", "run":
		return ""
	}
	return DefaultHTTPListen
}

// DefaultNATSListen is nats.listen's default: where herald dev's embedded
// NATS listens.
const DefaultNATSListen = "127.0.0.1:4222"

// Delivery is how hard Herald tries.
type Delivery struct {
	// RetryFor is how long a delivery (and a route) that fails in a way a
	// retry can fix is retried, from when it was queued; then the butler is
	// told it failed. Default 24h, at most 7 days (how long queues keep
	// messages).
	RetryFor Duration `yaml:"retry_for"`
}

// DefaultRetryFor is delivery.retry_for's default; MaxRetryFor its bound.
const (
	DefaultRetryFor = 24 * time.Hour
	MaxRetryFor     = 7 * 24 * time.Hour
)

// NATS says where the bus is. An empty URL means the embedded server of
// `herald dev`.
type NATS struct {
	URL string `yaml:"url"`
	// CredsFile is a NATS credentials file (JWT + nkey seed) for this process.
	CredsFile string `yaml:"creds_file"`
	// Replicas of every stream and bucket: 1 for one server, 3 for a cluster.
	Replicas int `yaml:"replicas"`
	// StoreDir is where the embedded server keeps JetStream data.
	StoreDir string `yaml:"store_dir"`
	// Listen is host:port of the embedded server (port 0: any free port).
	Listen string `yaml:"listen"`
	// Wait is how long a service waits at start for NATS and JetStream to
	// answer (a server starting, a cluster electing leaders); default 2m.
	Wait Duration `yaml:"wait"`
	// FilesMaxBytes bounds the file store herald_files, where files wait
	// 24 h (default 2 GiB); herald setup applies a change.
	FilesMaxBytes int64 `yaml:"files_max_bytes"`
}

// Butler is one agent of the fleet.
type Butler struct {
	Name           string `yaml:"name"`
	DefaultChannel string `yaml:"default_channel"`
	// MCPHTTP is host:port of its streamable HTTP MCP endpoint (served at
	// /mcp). Unset, it is a loopback port of its own (defaultMCPHTTP).
	MCPHTTP string `yaml:"mcp_http"`
	// mcpHTTPDefault is the address MCPHTTP was given because the file set
	// none ("" if it set one), so that herald dev may move it off a taken
	// port and the butler binary can say to set mcp_http.
	mcpHTTPDefault string
	// MCPTokenEnv or MCPTokenFile name a static bearer token every MCP HTTP
	// request must carry (Authorization: Bearer <token>); tokens minted with
	// `herald token mint` are accepted too. stdio needs none.
	MCPTokenEnv  string `yaml:"mcp_token_env"`
	MCPTokenFile string `yaml:"mcp_token_file"`
	// AllowedHosts are the Host names the MCP endpoint answers besides
	// localhost and the address it is bound to (a name behind a proxy, the
	// compose service name); every other Host is refused.
	AllowedHosts []string `yaml:"allowed_hosts"`
	// MaxSessions is how many MCP sessions the butler keeps over HTTP at
	// once (default 100). Every initialize opens one and each costs memory,
	// so without a bound a client that never closes its sessions grows the
	// butler until it dies. At the limit a new initialize ends the session
	// idle longest; if none is idle it is refused (503). stdio has one
	// session and no limit.
	MaxSessions int `yaml:"max_sessions"`
	// SessionIdleTimeout ends an MCP session over HTTP that has had no
	// request in flight and no open GET stream for this long (default 1h,
	// at least 1s). A client whose session ended gets 404 and starts a new
	// one; a connected Claude Code keeps its GET stream open, so it is never
	// idle.
	SessionIdleTimeout Duration `yaml:"session_idle_timeout"`
	// Approvers limit who may answer this butler's permission prompts, as
	// "<integration>:<sender>" ("tg_main:12345"); each must be an approver
	// of that integration (inbound.approvers). Unset: every approver of
	// every integration granted to it (approvals.go).
	Approvers []string `yaml:"approvers"`
	// Quorum makes a prompt for a tool whose name matches need more than
	// one approver's allow (approvals.go).
	Quorum []Quorum `yaml:"quorum"`
	// Files: where the files it sends may come from, how big, and where
	// its downloads go (files.go).
	Files Files `yaml:"files"`
	// Run: a message no connected session takes starts Claude Code
	// headless for it (run.go); unset, messages wait for a session.
	Run *Run `yaml:"run"`
}

// A butler's session bounds: max_sessions' and session_idle_timeout's
// defaults, and the shortest session_idle_timeout taken (a client pauses
// between its requests, and a session ended under it has to start over).
const (
	DefaultMaxSessions        = 100
	DefaultSessionIdleTimeout = time.Hour
	MinSessionIdleTimeout     = time.Second
)

// Integration is one configured account of a channel type.
type Integration struct {
	ID   string `yaml:"id"`
	Type string `yaml:"type"`
	// Disabled integrations neither send nor receive.
	Disabled bool   `yaml:"disabled"`
	Grants   Grants `yaml:"grants"`
	// OnUncertain is what a delivery does when an earlier attempt died while
	// calling the provider, so that call's outcome is unknown: resend (the
	// default; at least once, the human may see it twice) or skip (at most
	// once, it may be missing). Either way it is audited and the butler told.
	OnUncertain string `yaml:"on_uncertain"`
	// RateLimitOut are the provider's sending limits, kept before the
	// provider has to refuse (Telegram's by default).
	RateLimitOut OutLimits `yaml:"rate_limit_out"`
	// Topics (Telegram): per_butler puts each butler's messages to a forum
	// group in a topic of its own (topics.go).
	Topics Topics `yaml:"topics"`
	// AllowTo lists where a butler may send through this integration: chat
	// ids, email addresses, @domains, webhook names; "any" lifts the limit.
	// Empty: the integration's default recipient and its inbound allow_from.
	AllowTo []string `yaml:"allow_to"`
	// EscalateTo are the integrations a note with ack_within goes to next,
	// in order, when nobody acknowledged it in time (attention.go).
	EscalateTo []string `yaml:"escalate_to"`

	// Typing shows "typing…" in the chat of a message that reached one of
	// its butler's sessions, until the model answers it (at most 2
	// minutes); nil: on where the channel has it (spec.Channel.Typing).
	Typing *bool `yaml:"typing"`
	// AckReaction, if set, is an emoji put on each message that reached a
	// session, on receipt (Telegram: one of its reactions, e.g. 👀).
	AckReaction string `yaml:"ack_reaction"`

	// QuietHours, if set, holds the notes below its pass urgency during
	// those hours, and sends them as one digest when they end (quiet.go).
	QuietHours *QuietHours `yaml:"quiet_hours"`

	Inbound Inbound `yaml:"inbound"`

	// Settings are the keys of the channel type's own (a token, a default
	// chat, a listener), decoded into the channel's struct and checked by it.
	Settings ChannelSettings `yaml:"-"`
}

// UnmarshalYAML decodes the common keys and then, into the channel's own
// settings, the rest; which keys exist at all was checked before (checkKeys).
// A value of the wrong kind leaves its key unset and the others decoded,
// and the integration is kept: checkKeys has named that value at its line,
// and the integration's other problems are found too (the YAML decoder
// drops a list item whose UnmarshalYAML fails, which would leave a butler
// whose default channel it is with a misleading one).
func (in *Integration) UnmarshalYAML(n *yaml.Node) error {
	type plain Integration
	err := n.Decode((*plain)(in))
	if s := newSettings(in.Type); s != nil { // nil: an unknown or unbuilt type, which Validate names
		in.Settings = s
		err = joinTypeErrors(err, n.Decode(s))
	}
	var te *yaml.TypeError
	if errors.As(err, &te) && in.Type == mappingValue(n, "type") {
		return nil
	}
	return err // not decoded at all (a key written twice): dropped
}

// Inbound is how an integration takes messages from people. An integration
// receives only if its inbound block is present (and not enabled: false); the
// web integration always does.
type Inbound struct {
	Enabled   bool     `yaml:"enabled"`
	DMPolicy  string   `yaml:"dm_policy"`
	AllowFrom []string `yaml:"allow_from"`
	Approvers []string `yaml:"approvers"`
	// RateLimit is each sender's bucket (and 10x for the integration), kept
	// by the switchboard before anyone is let in.
	RateLimit RateLimit `yaml:"rate_limit"`
	// ChannelRateLimit bounds the channel notifications each butler gets
	// from this integration, in place of channels.default_rate_limit.
	ChannelRateLimit *ChannelRateLimit `yaml:"channel_rate_limit"`
}

// UnmarshalYAML turns inbound on when the block is present, unless it says
// enabled: false.
func (in *Inbound) UnmarshalYAML(n *yaml.Node) error {
	type plain Inbound
	p := plain{Enabled: true}
	err := n.Decode(&p)
	*in = Inbound(p)
	return joinTypeErrors(err)
}

// On_uncertain values.
const (
	OnUncertainResend = "resend"
	OnUncertainSkip   = "skip"
)

// OutLimits are an integration's outbound limits, each written "N/unit"
// ("1/s", "20/min", "30/s"; "off" for none). Unset ones take the channel's
// defaults; Disabled turns them all off.
type OutLimits struct {
	PerChat  OutRate `yaml:"per_chat"`
	PerGroup OutRate `yaml:"per_group"`
	PerBot   OutRate `yaml:"per_bot"`
	// Burst is how many messages a chat may get at once before per_chat applies.
	Burst    int  `yaml:"burst"`
	Disabled bool `yaml:"disabled"`
}

// OutRate is N messages per Per; Set says it was written (Off: "off").
type OutRate struct {
	N   int
	Per time.Duration
	Set bool
}

// UnmarshalYAML parses "N/s", "N/min", "N/h" or "N/<duration>", or "off".
func (r *OutRate) UnmarshalYAML(n *yaml.Node) error {
	v := strings.TrimSpace(n.Value)
	if v == "off" || v == "0" {
		*r = OutRate{Set: true}
		return nil
	}
	num, unit, ok := strings.Cut(v, "/")
	count, err := strconv.Atoi(strings.TrimSpace(num))
	if !ok || err != nil || count < 0 {
		return typeError(n, "%s is not a rate like 1/s, 20/min or 30/s, or off", quoteNode(n))
	}
	var per time.Duration
	switch unit = strings.TrimSpace(unit); unit {
	case "s", "sec", "second":
		per = time.Second
	case "min", "minute":
		per = time.Minute
	case "h", "hour":
		per = time.Hour
	default:
		if per, err = time.ParseDuration(unit); err != nil || per <= 0 {
			return typeError(n, "%s is not a rate like 1/s, 20/min or 30/s, or off", quoteNode(n))
		}
	}
	*r = OutRate{N: count, Per: per, Set: true}
	return nil
}

// RateLimit is a token bucket; 0/0 means unthrottled.
type RateLimit struct {
	RPS   float64 `yaml:"rps"`
	Burst int     `yaml:"burst"`
}

// Binding routes inbound messages of an integration (and optionally one chat)
// to a butler.
type Binding struct {
	Integration string `yaml:"integration"`
	Chat        string `yaml:"chat"`
	Butler      string `yaml:"butler"`
}

// Grants lists the butlers an integration may be used by: "all", or names.
type Grants struct {
	All   bool
	Names []string
}

// UnmarshalYAML accepts `all` or a list of butler names.
func (g *Grants) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Value != "all" {
			return typeError(n, "grants must be \"all\" or a list of butler names, not %q", n.Value)
		}
		g.All = true
		return nil
	case yaml.SequenceNode:
		for _, item := range n.Content {
			if item.Kind != yaml.ScalarNode {
				return typeError(item, "grants must be \"all\" or a list of butler names, like [health, finance]")
			}
		}
		return n.Decode(&g.Names)
	default:
		return typeError(n, "grants must be \"all\" or a list of butler names, like [health, finance]")
	}
}

// Allows reports whether butler may use the integration.
func (g Grants) Allows(butler string) bool {
	return g.All || slices.Contains(g.Names, butler)
}

// Duration is a time.Duration written as "30s" in YAML.
type Duration time.Duration

// UnmarshalYAML parses a duration (ParseDuration).
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := ParseDuration(n.Value)
	if err != nil {
		return typeError(n, "%s is not a duration like 30s, 2m, 8h or 7d", quoteNode(n))
	}
	*d = Duration(v)
	return nil
}

var leadingDays = regexp.MustCompile(`^([0-9]{1,5})d(.*)$`)

// ParseDuration reads a duration as Herald takes it everywhere (the
// configuration, every command's flags): a Go duration (90s, 1h30m),
// optionally led by whole days (7d, 1d12h).
func ParseDuration(s string) (time.Duration, error) {
	if m := leadingDays.FindStringSubmatch(s); m != nil {
		days, _ := strconv.Atoi(m[1])
		d := time.Duration(days) * 24 * time.Hour
		if m[2] == "" {
			return d, nil
		}
		rest, err := time.ParseDuration(m[2])
		if err != nil || rest < 0 {
			return 0, fmt.Errorf("%q is not a duration like 30s, 2m, 8h or 7d", s)
		}
		return d + rest, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration like 30s, 2m, 8h or 7d", s)
	}
	return d, nil
}

// DurationFlag is a command-line flag holding a duration (ParseDuration).
type DurationFlag struct{ D *time.Duration }

// String is the flag's value, as flag's defaults print it.
func (f DurationFlag) String() string {
	if f.D == nil {
		return "0s"
	}
	return f.D.String()
}

// Set parses a value given on the command line.
func (f DurationFlag) Set(s string) error {
	d, err := ParseDuration(s)
	if err != nil {
		return errors.New("not a duration like 30s, 2m, 8h or 7d")
	}
	*f.D = d
	return nil
}

// Load reads the file at path; an empty path gives Default(). A file that
// cannot be used as written is an *InvalidError naming it.
func Load(path string) (*Config, error) {
	if path == "" {
		return Default(), nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	c, probs := parse(b, nil)
	if len(probs) > 0 {
		e := invalid(probs, c.names())
		e.File = path
		return nil, e
	}
	return c, nil
}

// Parse decodes YAML, applies defaults and validates. Unknown keys are errors,
// so a typo cannot silently switch a setting off. Every problem is reported
// at once, unknown keys, values of the wrong kind and what Validate finds
// alike, each as "line N: " and the path of its key, in an *InvalidError.
func Parse(b []byte) (*Config, error) {
	c, probs := parse(b, nil)
	if len(probs) > 0 {
		return nil, invalid(probs, c.names())
	}
	return c, nil
}

// parse is Parse's work, and CheckFile's: the configuration as far as it
// could be decoded (a value of the wrong kind left unset, the rest decoded;
// nil if the YAML could not be read at all), its defaults applied and, with
// getenv, the environment's overrides, and every problem found in it.
func parse(b []byte, getenv Getenv) (*Config, []problem) {
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, []problem{syntaxProblem(b, err)}
	}
	c := &Config{}
	var root *yaml.Node
	var probs []problem
	if doc.Kind != 0 {
		root = &doc
		if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
			root = doc.Content[0]
		}
		probs = checkKeys(root)
		// A value of the wrong kind is left unset, the rest decoded, so
		// that what is wrong elsewhere is found too.
		probs = append(probs, undecoded(root.Decode(c), probs)...)
	}
	c.applyDefaults()
	if getenv != nil {
		c.ApplyEnv(getenv)
	}
	probs = append(probs, placed(root, c.problems(), probs)...)
	c.placeRuns(root)
	return c, probs
}

// Default is the configuration of `herald dev` with no file: one butler,
// `assistant`, whose notifications go to the log, and a web chat on
// localhost through which anyone at this machine can talk to it.
func Default() *Config {
	c := &Config{Integrations: []Integration{{
		ID: "web", Type: "web", Grants: Grants{All: true},
		Inbound: Inbound{Enabled: true, DMPolicy: "allowlist", AllowFrom: []string{AllowAnyone}},
	}}}
	c.applyDefaults()
	return c
}

// DefaultMCPPort is the first butler's MCP port when the file sets no
// mcp_http; the next ones count up from it.
const DefaultMCPPort = 7701

// defaultMCPHTTP gives each butler without mcp_http a loopback address:
// the i-th butler of the file 127.0.0.1:7701+i, or the next port up that
// no other butler's mcp_http names. Loopback, because an MCP endpoint
// reachable from the network has to be asked for; counted in the order of
// the file, so a restart, or a client configured with the address, finds
// the butler where it was.
func (c *Config) defaultMCPHTTP() {
	taken := map[int]bool{}
	for _, b := range c.Butlers {
		if _, p, err := net.SplitHostPort(b.MCPHTTP); err == nil {
			if n, err := strconv.Atoi(p); err == nil && n > 0 {
				taken[n] = true
			}
		}
	}
	for i := range c.Butlers {
		b := &c.Butlers[i]
		if b.MCPHTTP != "" {
			continue
		}
		port := DefaultMCPPort + i
		for taken[port] {
			port++
		}
		taken[port] = true
		b.MCPHTTP = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		b.mcpHTTPDefault = b.MCPHTTP
	}
}

// MCPHTTPDefault is the address the butler listens on because the file
// sets no mcp_http for it; "" if the file sets one.
func (b Butler) MCPHTTPDefault() string { return b.mcpHTTPDefault }

// AllowAnyone in allow_from lets every sender in: meant for a web chat that
// only this machine can reach.
const AllowAnyone = "*"

func (c *Config) applyDefaults() {
	if len(c.Butlers) == 0 {
		c.Butlers = []Butler{{Name: DefaultButlerName, DefaultChannel: "log"}}
	}
	c.defaultMCPHTTP()
	for i := range c.Butlers {
		b := &c.Butlers[i]
		if b.DefaultChannel == "" {
			b.DefaultChannel = "log"
		}
		if b.MaxSessions == 0 {
			b.MaxSessions = DefaultMaxSessions
		}
		if b.Run != nil {
			b.Run.Defaults()
		}
		if b.SessionIdleTimeout == 0 {
			b.SessionIdleTimeout = Duration(DefaultSessionIdleTimeout)
		}
	}
	if c.DefaultButler == "" {
		c.DefaultButler = c.Butlers[0].Name
	}
	if c.MaxContentChars == 0 {
		c.MaxContentChars = DefaultMaxContentChars
	}
	if c.NotifyTimeout == 0 {
		c.NotifyTimeout = Duration(DefaultNotifyTimeout)
	}
	if c.NATS.Listen == "" {
		c.NATS.Listen = DefaultNATSListen
	}
	if c.NATS.StoreDir == "" {
		c.NATS.StoreDir = ".herald/nats"
	}
	if c.NATS.Replicas == 0 {
		c.NATS.Replicas = 1
	}
	if c.NATS.Wait == 0 {
		c.NATS.Wait = Duration(2 * time.Minute)
	}
	if c.Approvals.GrantTTL == 0 {
		c.Approvals.GrantTTL = Duration(DefaultGrantTTL)
	}
	if c.Delivery.RetryFor == 0 {
		c.Delivery.RetryFor = Duration(DefaultRetryFor)
	}
	// The log channel needs no account, so every fleet has one.
	if !slices.ContainsFunc(c.Integrations, func(in Integration) bool { return in.Type == "log" }) {
		c.Integrations = append(c.Integrations, Integration{ID: LogIntegrationID, Type: "log", Grants: Grants{All: true}})
	}
	for i := range c.Integrations {
		in := &c.Integrations[i]
		if in.Settings == nil {
			in.Settings = newSettings(in.Type)
		}
		if d, ok := in.Settings.(spec.Defaulter); ok {
			d.Defaults()
		}
		ch, _ := ChannelOf(in.Type)
		if in.Inbound.DMPolicy == "" {
			in.Inbound.DMPolicy = "allowlist"
		}
		if in.OnUncertain == "" {
			in.OnUncertain = OnUncertainResend
		}
		// A channel whose secret authenticates its senders has no one to
		// pair with.
		if ch.SignedSenders && len(in.Inbound.AllowFrom) == 0 {
			in.Inbound.AllowFrom = []string{AllowAnyone}
		}
		if ch.AlwaysReceives {
			in.Inbound.Enabled = true
		}
	}
}

// Validate reports every problem at once, each naming the key at fault.
func (c *Config) Validate() error {
	msgs := c.problems()
	if len(msgs) == 0 {
		return nil
	}
	probs := make([]problem, len(msgs))
	for i, m := range msgs {
		probs[i] = problem{text: m}
	}
	return invalid(probs, c.names())
}

// problems are Validate's: each starts with the path of the key at fault
// (integrations[1].id; for an integration's channel settings,
// "integrations[1] (telegram tg): " and the key), which Parse finds the
// line of.
func (c *Config) problems() []string {
	var errs []string
	add := func(format string, a ...any) { errs = append(errs, fmt.Sprintf(format, a...)) }

	if c.NATS.URL != "" {
		if u, err := url.Parse(c.NATS.URL); err != nil || u.Host == "" {
			add("nats.url %q is not a URL like nats://host:4222", c.NATS.URL)
		}
	}
	if c.NATS.Replicas < 1 || c.NATS.Replicas > 5 {
		add("nats.replicas must be 1 to 5, not %d", c.NATS.Replicas)
	}
	if c.MaxContentChars < 0 {
		add("max_content_chars must be positive")
	}
	c.Approvals.validate(add)
	if c.NotifyTimeout < 0 {
		add("notify_timeout must be positive")
	}
	if c.NATS.Wait < 0 {
		add("nats.wait must be positive")
	}
	if rf := time.Duration(c.Delivery.RetryFor); rf < time.Second || rf > MaxRetryFor {
		add("delivery.retry_for must be between 1s and %s (how long queues keep messages), not %s", MaxRetryFor, rf)
	}
	for _, a := range [][2]string{{"nats.listen", c.NATS.Listen}, {"http_listen", c.HTTPListen}} {
		if a[1] != "" {
			if why := CheckAddress(a[1]); why != "" {
				add("%s %s", a[0], why)
			}
		}
	}
	c.checkIntegrations(add)
	c.checkQuietHours(add)
	c.checkChannels(add)
	c.checkButlers(add)
	c.checkEnvNames(add)
	c.checkTranscribe(add)
	c.checkFilesStore(add)
	c.checkTopics(add)
	if c.Butler(c.DefaultButler) == nil {
		add("default_butler %q is not a configured butler", c.DefaultButler)
	}
	for i, bd := range c.Bindings {
		at := fmt.Sprintf("bindings[%d]", i)
		if c.Integration(bd.Integration) == nil {
			add("%s.integration %q is not configured", at, bd.Integration)
		}
		if c.Butler(bd.Butler) == nil {
			add("%s.butler %q is not configured", at, bd.Butler)
		}
	}
	return errs
}

// checkIntegrations is Validate's step for the integrations.
func (c *Config) checkIntegrations(add func(format string, a ...any)) {
	ids := map[string]bool{}
	for i, in := range c.Integrations {
		at := fmt.Sprintf("integrations[%d]", i)
		if !idPattern.MatchString(in.ID) {
			add("%s.id %q must be letters, digits, _ or - (at most 63, not starting with _ or -)", at, in.ID)
		}
		if ids[in.ID] {
			add("%s.id %q is used twice", at, in.ID)
		}
		ids[in.ID] = true
		ch, built := ChannelOf(in.Type)
		switch {
		case !slices.Contains(ChannelTypes, in.Type):
			add("%s.type %q is not one of %s", at, in.Type, strings.Join(ChannelTypes, ", "))
		case !built:
			add("%s.type %s is not built into this herald (it has %s); remove the integration or use a build that has it", at, in.Type, strings.Join(BuiltChannels(), ", "))
		case in.Settings != nil:
			for _, p := range in.Settings.Check(c.Integrations[i].Facts()) {
				add("%s (%s %s): %s", at, in.Type, in.ID, p)
			}
		}
		if ch.SignedSenders && in.Inbound.Enabled && in.Inbound.DMPolicy == "pairing" {
			add("%s.inbound.dm_policy pairing cannot work for %s (no code can reach its sender); its secret authenticates senders", at, in.Type)
		}
		switch in.OnUncertain {
		case OnUncertainResend, OnUncertainSkip:
		default:
			add("%s.on_uncertain %q must be resend (at least once) or skip (at most once)", at, in.OnUncertain)
		}
		if in.RateLimitOut.Burst < 0 {
			add("%s.rate_limit_out.burst must not be negative", at)
		}
		if in.Typing != nil && *in.Typing && built && !ch.Typing {
			add("%s.typing: %s has no typing indicator (telegram and discord have one); remove the key", at, in.Type)
		}
		if in.AckReaction != "" && built && !ch.Reactions {
			add("%s.ack_reaction: %s has no reactions; remove the key", at, in.Type)
		}
		switch in.Inbound.DMPolicy {
		case "pairing", "allowlist", "disabled":
		default:
			add("%s.inbound.dm_policy %q must be pairing, allowlist or disabled", at, in.Inbound.DMPolicy)
		}
		if in.Inbound.RateLimit.RPS < 0 || in.Inbound.RateLimit.Burst < 0 {
			add("%s.inbound.rate_limit must not be negative", at)
		}
		for j, n := range in.Grants.Names {
			if c.Butler(n) == nil {
				add("%s.grants[%d] names butler %q, which is not configured", at, j, n)
			}
		}
	}
	c.checkEscalations(add)
}

// ShowsTyping reports whether in shows "typing…" for a message that
// reached a session: its typing key, else whether its channel has it.
func (in *Integration) ShowsTyping() bool {
	ch, _ := ChannelOf(in.Type)
	if in.Typing != nil {
		return *in.Typing && ch.Typing
	}
	return ch.Typing
}

// checkButlers is Validate's step for the butlers.
func (c *Config) checkButlers(add func(format string, a ...any)) {
	names, addrs := map[string]bool{}, map[string]string{}
	for i, b := range c.Butlers {
		at := fmt.Sprintf("butlers[%d]", i)
		if !namePattern.MatchString(b.Name) {
			add("%s.name %q must match ^[a-z][a-z0-9_-]{0,62}$", at, b.Name)
		}
		if slices.Contains(ReservedButlerNames, b.Name) {
			add("%s.name %q is reserved: Herald sends its own messages (pairing codes) under that name; choose another", at, b.Name)
		}
		if names[b.Name] {
			add("%s.name %q is used twice", at, b.Name)
		}
		names[b.Name] = true
		if b.MCPHTTP != "" {
			if why := CheckAddress(b.MCPHTTP); why != "" {
				add("%s.mcp_http %s", at, why)
			}
		}
		if other, ok := addrs[b.MCPHTTP]; ok && !strings.HasSuffix(b.MCPHTTP, ":0") {
			add("%s.mcp_http %s is butler %q's too; give each butler its own port", at, b.MCPHTTP, other)
		} else if b.MCPHTTP != "" {
			addrs[b.MCPHTTP] = b.Name
		}
		if _, err := c.Resolve(b.Name, b.DefaultChannel); err != nil {
			add("%s.default_channel: %v", at, err)
		}
		if b.MaxSessions < 0 {
			add("%s.max_sessions must be a positive number of MCP sessions open at once, not %d; leave it out for %d", at, b.MaxSessions, DefaultMaxSessions)
		}
		if d := time.Duration(b.SessionIdleTimeout); d < 0 || (d > 0 && d < MinSessionIdleTimeout) {
			add("%s.session_idle_timeout must be at least %s, not %s; leave it out for %s", at, MinSessionIdleTimeout, d, DefaultSessionIdleTimeout)
		}
		c.checkApprovers(at, &c.Butlers[i], add)
		checkFiles(at, &c.Butlers[i], add)
		if b.Run != nil {
			checkRun(at, b.Run, add)
		}
	}
}

// ButlerNames are the names of the fleet's butlers.
func (c *Config) ButlerNames() []string {
	var out []string
	for _, b := range c.Butlers {
		out = append(out, b.Name)
	}
	return out
}

// Butler returns the named butler, or nil.
func (c *Config) Butler(name string) *Butler {
	for i := range c.Butlers {
		if c.Butlers[i].Name == name {
			return &c.Butlers[i]
		}
	}
	return nil
}

// Integration returns the integration with that id, or nil.
func (c *Config) Integration(id string) *Integration {
	for i := range c.Integrations {
		if c.Integrations[i].ID == id {
			return &c.Integrations[i]
		}
	}
	return nil
}

// Errors of Resolve; both wrap ErrInvalid's siblings so callers can map them to
// envelope error classes.
var (
	// ErrUnknownChannel: the channel names a type Herald does not have.
	ErrUnknownChannel = errors.New("unknown channel")
	// ErrNoIntegration: no enabled integration of that channel is configured.
	ErrNoIntegration = errors.New("no integration")
	// ErrNotGranted: the integration exists but the butler may not use it.
	ErrNotGranted = errors.New("not granted")
)

// Resolve turns a notify's channel ("telegram" or "telegram:tg_main") into the
// integration butler may use: a bare type is the first enabled integration of
// that type granted to it.
func (c *Config) Resolve(butler, channel string) (*Integration, error) {
	typ, id, _ := strings.Cut(channel, ":")
	if !slices.Contains(ChannelTypes, typ) {
		return nil, fmt.Errorf("%w type %q (known: %s)", ErrUnknownChannel, typ, strings.Join(ChannelTypes, ", "))
	}
	found := false
	for i := range c.Integrations {
		in := &c.Integrations[i]
		if in.Type != typ || in.Disabled || (id != "" && in.ID != id) {
			continue
		}
		found = true
		if in.Grants.Allows(butler) {
			return in, nil
		}
	}
	switch {
	case found && id != "":
		return nil, fmt.Errorf("%w: integration %q is not granted to butler %q; add it to the integration's grants", ErrNotGranted, channel, butler)
	case found:
		return nil, fmt.Errorf("%w: no %s integration is granted to butler %q; add it to an integration's grants", ErrNotGranted, typ, butler)
	case id != "":
		return nil, fmt.Errorf("%w: no enabled integration %q is configured", ErrNoIntegration, channel)
	}
	return nil, fmt.Errorf("%w: no enabled %s integration is configured", ErrNoIntegration, typ)
}

// AllowAnyRecipient in allow_to lets a butler send anywhere the integration reaches.
const AllowAnyRecipient = spec.AllowAnyRecipient

// AllowsRecipient reports whether a send may go to recipient through the
// integration: an entry of allow_to ("any" for all; an email entry "@domain"
// for a whole domain), or, with no allow_to, the integration's default
// recipient, its inbound allow_from (unless that is "*") and approvers. An
// empty recipient is the default one. Email addresses compare in any case.
func (in *Integration) AllowsRecipient(recipient string) bool {
	r := strings.TrimSpace(recipient)
	rs, ok := in.Settings.(spec.Recipients)
	if r == "" || !ok {
		return true // the default; a channel without recipients (log, web) has none to limit
	}
	admits := func(entry, r string) bool { return entry == r }
	if m, ok := in.Settings.(spec.RecipientMatcher); ok {
		admits = m.Admits
	}
	allowed := in.AllowTo
	if len(allowed) == 0 {
		// The operator named these to be sent to.
		allowed = append([]string{rs.DefaultRecipient()}, rs.NamedRecipients()...)
		allowed = append(allowed, in.Inbound.Approvers...)
		for _, a := range in.Inbound.AllowFrom {
			if a != AllowAnyone {
				allowed = append(allowed, a)
			}
		}
	}
	for _, a := range allowed {
		a = strings.TrimSpace(a)
		if a == AllowAnyRecipient || (a != "" && admits(a, r)) {
			return true
		}
	}
	return false
}

// Channel is the fully qualified channel name of an integration, "type:id".
func (in *Integration) Channel() string { return in.Type + ":" + in.ID }

// ApplyEnv applies the environment overrides of architecture.md §6: NATS_URL,
// HERALD_HTTP_LISTEN, and each channel's own (TELEGRAM_API_URL, SMTP_URL).
func (c *Config) ApplyEnv(getenv Getenv) {
	if v := getenv("NATS_URL"); v != "" {
		c.NATS.URL = v
	}
	if v := getenv("HERALD_HTTP_LISTEN"); v != "" {
		c.HTTPListen = v
	}
	for i := range c.Integrations {
		if o, ok := c.Integrations[i].Settings.(spec.EnvOverrider); ok {
			o.ApplyEnv(getenv)
		}
	}
}

// Getenv is how secrets and overrides are looked up; tests pass their own.
type Getenv func(string) string

// Secret resolves a secret named by an environment variable or a file; the
// value is never part of an error message.
func Secret(getenv Getenv, envName, file string) (string, error) {
	if why := checkEnvName("its _env key", envName, ""); why != "" {
		// Load refuses such a file; a configuration built in code is
		// refused here, so the message cannot carry a pasted secret.
		return "", fmt.Errorf("%w: %s", ErrInvalid, why)
	}
	if envName != "" {
		if v := strings.TrimSpace(getenv(envName)); v != "" {
			return v, nil
		}
		if file == "" {
			return "", fmt.Errorf("%w: environment variable %s is not set", ErrInvalid, envName)
		}
	}
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("%w: secret file: %w", ErrInvalid, err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	return "", fmt.Errorf("%w: no secret configured", ErrInvalid)
}
