package config

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
)

// SecretRef is a secret the configuration reads: what needs it, the key that
// names it, where it is read from, and whether it is there. Its value is
// never held.
type SecretRef struct {
	// Of is what needs it: "integration tg_main (telegram)", "butler
	// health", "transcribe".
	Of string
	// Integration is the id of the integration that needs it; "" for a
	// butler's or transcribe's.
	Integration string
	// Key is the key that names it: "token_env", "inbound.auth_env",
	// "mcp_token_env", "run.env", "transcribe.api_key_env".
	Key string
	// Env is the variable it is read from; File, named by FileKey, the file
	// it is read from when Env is unset or none.
	Env, FileKey, File string
	// Set: the environment has Env, or File can be read and holds some.
	Set bool
	// Missing says why it is not there ("" when it is): "token_env
	// TELEGRAM_BOT_TOKEN is not set".
	Missing string
	// Without is what cannot work while it is missing: "the integration
	// cannot work".
	Without string
}

// Source is where the secret is read from, as a person would look for it:
// the variable and the key naming it, the file, or both
// ("TELEGRAM_BOT_TOKEN (token_env)", "token_file /run/secrets/tg").
func (s SecretRef) Source() string {
	file := s.FileKey + " " + s.File
	switch {
	case s.Env == "":
		return file
	case s.File == "":
		return s.Env + " (" + s.Key + ")"
	}
	return s.Env + " (" + s.Key + ") or " + file
}

// inboundSecretKeys are channel keys outside an integration's inbound
// block whose secret only verifies what comes in (Slack's signing
// secret): an integration that does not receive never reads it, as it
// never reads one of its inbound block's.
var inboundSecretKeys = []string{"signing_secret_env"}

// Secrets are the secrets c reads, in the order of its integrations (those
// disabled left out), its butlers and transcribe, each looked up with
// getenv (a file: read, never shown). They are what the configuration
// alone tells of what cannot work: a process that runs it reads the same,
// in its own environment.
func (c *Config) Secrets(getenv Getenv) []SecretRef {
	var out []SecretRef
	for _, in := range c.Integrations {
		if in.Disabled || in.Settings == nil {
			continue
		}
		of := fmt.Sprintf("integration %s (%s)", in.ID, in.Type)
		secretKeys(in.Settings, func(key, env, fileKey, file string) {
			if env != "" && !envNamePattern.MatchString(env) {
				return // a secret pasted in its place, never shown: a problem of the file
			}
			without := "the integration cannot work"
			if strings.HasPrefix(key, "inbound.") || slices.Contains(inboundSecretKeys, key) {
				if !in.Inbound.Enabled {
					return
				}
				without = "the integration cannot receive"
			}
			out = append(out, lookUp(getenv, SecretRef{Of: of, Integration: in.ID, Key: key, Env: env, FileKey: fileKey, File: file, Without: without}))
		})
	}
	for _, b := range c.Butlers {
		of := "butler " + b.Name
		if (b.MCPTokenEnv != "" || b.MCPTokenFile != "") && (b.MCPTokenEnv == "" || envNamePattern.MatchString(b.MCPTokenEnv)) {
			out = append(out, lookUp(getenv, SecretRef{Of: of, Key: "mcp_token_env", Env: b.MCPTokenEnv, FileKey: "mcp_token_file", File: b.MCPTokenFile,
				Without: "its MCP endpoint cannot start"}))
		}
		if b.Run == nil {
			continue
		}
		for _, k := range slices.Sorted(maps.Keys(b.Run.Env)) {
			if name, ok := strings.CutPrefix(b.Run.Env[k], "$"); ok && envNamePattern.MatchString(name) {
				out = append(out, lookUp(getenv, SecretRef{Of: of, Key: "run.env", Env: name, Without: "its runs get " + k + " empty"}))
			}
		}
	}
	if t := c.Transcribe; t != nil && envNamePattern.MatchString(t.APIKeyEnv) {
		out = append(out, lookUp(getenv, SecretRef{Of: "transcribe", Key: "transcribe.api_key_env", Env: t.APIKeyEnv,
			Without: "voice notes go to transcribe.url without a key"}))
	}
	return out
}

// lookUp fills in s.Set and s.Missing, as Secret would find them.
func lookUp(getenv Getenv, s SecretRef) SecretRef {
	var why []string
	if s.Env != "" {
		if strings.TrimSpace(getenv(s.Env)) != "" {
			s.Set = true
			return s
		}
		why = append(why, fmt.Sprintf("%s %s is not set", s.Key, s.Env))
	}
	if s.File != "" {
		b, err := os.ReadFile(s.File)
		var pe *fs.PathError
		switch {
		case errors.As(err, &pe):
			why = append(why, fmt.Sprintf("%s %s cannot be read: %v", s.FileKey, s.File, pe.Err))
		case err != nil:
			why = append(why, fmt.Sprintf("%s %s cannot be read: %v", s.FileKey, s.File, err))
		case strings.TrimSpace(string(b)) == "":
			why = append(why, fmt.Sprintf("%s %s is empty", s.FileKey, s.File))
		default:
			s.Set = true
			return s
		}
	}
	s.Missing = strings.Join(why, ", and ")
	return s
}

// Unworkable are the integrations whose secrets c names and getenv has
// not, by id, with why ("token_env TELEGRAM_BOT_TOKEN is not set"): what
// herald dev's banner and a check say CANNOT WORK without asking the
// messenger, which tells the same once it has tried.
func (c *Config) Unworkable(getenv Getenv) map[string]string {
	out := map[string]string{}
	for _, s := range c.Secrets(getenv) {
		if s.Set || s.Integration == "" {
			continue
		}
		if out[s.Integration] != "" {
			out[s.Integration] += "; "
		}
		out[s.Integration] += s.Missing
	}
	return out
}

// secretKeys calls found with each key of v (a channel's settings) that
// names a secret's variable, as EnvKeys finds them ("token_env",
// "inbound.auth_env"), the variable, and the file key beside it that may
// name a file instead ("token_file") and that file; a pair of which
// neither is written is left out.
func secretKeys(v any, found func(key, env, fileKey, file string)) {
	files := map[string]string{}
	walkStrings(reflect.ValueOf(v), "", func(key, value string) { files[key] = value })
	EnvKeys(v, func(key, env string) {
		fileKey := strings.TrimSuffix(key, "_env") + "_file"
		if env != "" || files[fileKey] != "" {
			found(key, env, fileKey[strings.LastIndex(fileKey, ".")+1:], files[fileKey])
		}
	})
}

// walkStrings calls found with the path and value of every string field
// of v, a struct or a pointer to one, in its nested blocks too.
func walkStrings(v reflect.Value, prefix string, found func(key, value string)) {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return
	}
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		switch {
		case name == "-" || !f.IsExported():
		case strings.Contains(opts, "inline"):
			walkStrings(v.Field(i), prefix, found)
		case f.Type.Kind() == reflect.String:
			found(prefix+name, v.Field(i).String())
		default:
			if name == "" {
				name = strings.ToLower(f.Name)
			}
			walkStrings(v.Field(i), prefix+name+".", found)
		}
	}
}

// Report is what CheckFile finds in a configuration without starting
// anything: every problem, and every secret it reads.
type Report struct {
	// Config is the configuration as far as it could be read (the
	// environment's overrides applied); nil if its YAML could not be.
	Config *Config
	// Problems are the file's, as Load finds them (with the environment's
	// overrides) and what keeps a butler's run from starting here, in the
	// order of the file.
	Problems []Problem
	// Secrets are Config's, looked up in the environment.
	Secrets []SecretRef
}

// Missing are the secrets of r that are not there.
func (r *Report) Missing() []SecretRef {
	return slices.DeleteFunc(slices.Clone(r.Secrets), func(s SecretRef) bool { return s.Set })
}

// CheckFile checks the configuration file at path ("" for Default) as
// every process that runs it would, with the environment getenv and the
// working directory base (where a butler's run starts), and starts nothing.
// The error is for a file that cannot be read; every problem of one that
// can is in the report.
func CheckFile(path string, getenv Getenv, base string) (*Report, error) {
	var c *Config
	var probs []problem
	if path == "" {
		c = Default()
		c.ApplyEnv(getenv)
		for _, m := range c.problems() {
			probs = append(probs, problem{text: m})
		}
	} else {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		c, probs = parse(b, getenv)
	}
	r := &Report{Config: c}
	if c != nil {
		for _, name := range c.ButlerNames() {
			var e *InvalidError
			if errors.As(c.CheckRunHost(name, base), &e) {
				for _, p := range e.Problems {
					probs = append(probs, problem{line: p.Line, text: p.Text})
				}
			}
		}
		r.Secrets = c.Secrets(getenv)
	}
	if len(probs) > 0 {
		r.Problems = invalid(probs, c.names()).Problems
	}
	return r, nil
}
