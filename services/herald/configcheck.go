package herald

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/heraldhq/herald/pkg/config"
)

const configUsage = `Usage:
  herald config check [FILE]

Checks a herald.yaml without starting anything, as every process that runs
it would, the environment's overrides applied: prints every problem, not only
the first, as FILE:LINE: what is wrong and what to write instead; then each
secret the file names (an integration's token_env, a butler's mcp_token_env
and run.env $NAME, transcribe's api_key_env), the variable or file it is read
from, and whether this environment has it: set, or NOT SET and what cannot
work without it. No secret is ever printed, not even one pasted into the
file. FILE is what the other commands use: the one given (or --config), else
HERALD_CONFIG, else the file the herald dev started in this directory runs
with, else the built-in configuration; the first line says which. Exit 1 on
any problem, and on any secret not set, since what needs it cannot work:
check a fleet's file where its secrets are (deploy/herald.yaml with
deploy/.env loaded). With --json, one JSON object per problem, then per
secret, as every --json list (docs/operations.md, "Scripting the
commands"); the exit is the same.

Examples:
  herald config check
  herald config check --json deploy/herald.yaml | jq -r 'select(.set == false) | .env'
`

// runConfig is `herald config check [FILE]`: every problem of a
// configuration and the secrets it needs (config.CheckFile), without
// starting anything.
func runConfig(ctx context.Context, args []string, o IO) error {
	sub, fs, args := subcommandFlags("config", configUsage, args, o)
	flagPath := fs.String("config", "", "the herald.yaml to check, as FILE (default $HERALD_CONFIG, else the running herald dev's)")
	asJSON := fs.Bool("json", false, "print one JSON object per problem and per secret (JSON Lines)")
	if err := checkSub(fs, "config", sub, "check"); err != nil {
		return err
	}
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 1 || (len(pos) == 1 && *flagPath != "") {
		return badUsage(fs)
	}
	path := *flagPath
	if len(pos) == 1 {
		path = pos[0]
	}
	path, what, err := fileToCheck(path, o.Getenv)
	if err != nil {
		return err
	}
	base, err := os.Getwd()
	if err != nil {
		return err
	}
	r, err := config.CheckFile(path, o.Getenv, base)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if *asJSON {
		if err := jsonLines(o.Stdout, reportItems(r, path)); err != nil {
			return err
		}
		return reportError(r)
	}
	fmt.Fprintf(o.Stdout, "Checked %s.\n", what)
	return printReport(o.Stdout, r, path)
}

// checkItem is one line of herald config check --json: a problem (file,
// line, text) or a secret (where it is read from and whether this
// environment has it, never its value).
type checkItem struct {
	Kind        string `json:"kind"`
	File        string `json:"file,omitempty"`
	Line        int    `json:"line,omitempty"`
	Text        string `json:"text,omitempty"`
	Of          string `json:"of,omitempty"`
	Integration string `json:"integration,omitempty"`
	Key         string `json:"key,omitempty"`
	Env         string `json:"env,omitempty"`
	FileKey     string `json:"file_key,omitempty"`
	SecretFile  string `json:"secret_file,omitempty"`
	Set         *bool  `json:"set,omitempty"`
	Missing     string `json:"missing,omitempty"`
	Without     string `json:"without,omitempty"`
}

// reportItems are r's problems, then its secrets, as checkItems; file is
// the file checked ("" for the built-in configuration).
func reportItems(r *config.Report, file string) []checkItem {
	var items []checkItem
	for _, p := range r.Problems {
		items = append(items, checkItem{Kind: "problem", File: file, Line: p.Line, Text: p.Text})
	}
	for _, s := range r.Secrets {
		items = append(items, checkItem{Kind: "secret", Of: s.Of, Integration: s.Integration, Key: s.Key, Env: s.Env,
			FileKey: s.FileKey, SecretFile: s.File, Set: &s.Set, Missing: s.Missing, Without: s.Without})
	}
	return items
}

// fileToCheck is the file herald config check checks, as the other
// commands would take it (loadConfig), and how the first line names it:
// path, else HERALD_CONFIG, else the file the herald dev started here
// runs with ("" for the built-in configuration).
func fileToCheck(path string, getenv func(string) string) (string, string, error) {
	if path != "" {
		return path, path, nil
	}
	if env := getenv("HERALD_CONFIG"); env != "" {
		return env, env + " (HERALD_CONFIG)", nil
	}
	st, err := ReadDevState(DevStateFile)
	switch {
	case err != nil:
		return "", "", err
	case st == nil:
		return "", "the built-in configuration (no FILE, --config or HERALD_CONFIG, and no herald dev started here)", nil
	}
	runs := "runs with"
	if !alive(st.PID) {
		runs = "ran with (it is no longer running)"
	}
	if st.Config == "" {
		return "", "the built-in configuration, which the herald dev started here " + runs + " (" + DevStateFile + ")", nil
	}
	return st.Config, st.Config + ", which the herald dev started here " + runs + " (" + DevStateFile + ")", nil
}

// printReport prints r, the check of file ("" for the built-in
// configuration): its problems, each as FILE:LINE: TEXT, then its
// secrets. Anything that cannot work is its error, which exits 1.
func printReport(w io.Writer, r *config.Report, file string) error {
	where := file
	if where == "" {
		where = "the built-in configuration"
	}
	for _, p := range r.Problems {
		if p.Line > 0 {
			fmt.Fprintf(w, "%s:%d: %s\n", where, p.Line, p.Text)
		} else {
			fmt.Fprintf(w, "%s: %s\n", where, p.Text)
		}
	}
	if len(r.Secrets) > 0 {
		if len(r.Problems) > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "Secrets, as this environment has them (never shown):\n")
		for _, s := range r.Secrets {
			state := "set"
			switch {
			case !s.Set && s.File == "":
				state = "NOT SET: " + s.Without
			case !s.Set:
				state = "NOT SET (" + s.Missing + "): " + s.Without
			}
			fmt.Fprintf(w, "  %s: %s  %s\n", s.Of, s.Source(), state)
		}
	}
	if err := reportError(r); err != nil {
		return err
	}
	if len(r.Secrets) == 0 {
		fmt.Fprintf(w, "No problems; it names no secrets.\n")
	} else {
		fmt.Fprintf(w, "No problems, and every secret it names is set.\n")
	}
	return nil
}

// reportError is what is wrong with r in one line, nil if nothing is:
// herald config check's error, which exits 1.
func reportError(r *config.Report) error {
	var wrong []string
	switch n := len(r.Problems); {
	case r.Config == nil:
		wrong = append(wrong, "the file is not YAML that can be read: fix that line, then check again for the rest")
	case n > 0:
		wrong = append(wrong, count(n, "problem")+": every Herald process refuses the file as it is")
	}
	switch n := len(r.Missing()); {
	case n == 1:
		wrong = append(wrong, "1 secret not set: what needs it cannot work until it is set in the environment of the process that runs it")
	case n > 1:
		wrong = append(wrong, count(n, "secret")+" not set: what needs each cannot work until it is set in the environment of the process that runs it")
	}
	if len(wrong) > 0 {
		return errors.New(strings.Join(wrong, "; "))
	}
	return nil
}

// count is "1 problem", "2 problems".
func count(n int, what string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", what)
	}
	return fmt.Sprintf("%d %ss", n, what)
}
