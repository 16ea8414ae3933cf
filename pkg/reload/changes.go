// Package reload applies a changed herald.yaml to a running process (design
// §11, "Hot reload"): it notices a change (SIGHUP, the file itself with
// watch_config, or `herald reload` over NATS), loads and checks the new file,
// keeps the running configuration if it is invalid and says why, and
// otherwise hands the new one to the process with the list of what changed,
// for its log line and the audit record config_reloaded.
package reload

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/heraldhq/herald/pkg/config"
)

// Changes lists what differs from old to new, one line each, naming keys
// and ids, never values (a value may be a secret's path or a chat): "butler
// garden added", "integration tg_main: grants, inbound changed", "bindings
// changed". Restart says which of them take effect only when the process
// restarts.
func Changes(old, new *config.Config) []string {
	var out []string
	top := fieldsChanged(reflect.ValueOf(*old), reflect.ValueOf(*new), "butlers", "integrations", "bindings")
	for _, k := range top {
		out = append(out, k+" changed")
	}
	out = append(out, named("butler", old.Butlers, new.Butlers, func(b config.Butler) string { return b.Name })...)
	out = append(out, named("integration", old.Integrations, new.Integrations, func(in config.Integration) string { return in.ID })...)
	if !same(reflect.ValueOf(old.Bindings), reflect.ValueOf(new.Bindings)) {
		out = append(out, "bindings changed")
	}
	return out
}

// restartKeys are the top-level keys a running process cannot take anew:
// where it connects and listens.
var restartKeys = []string{"nats", "http_listen", "watch_config"}

// butlerRestartKeys are a butler's keys its running MCP server was built
// with: where it listens, its token, the hosts and sessions it takes.
var butlerRestartKeys = []string{"mcp_http", "mcp_token_env", "mcp_token_file", "allowed_hosts", "max_sessions"}

// Restart are the changes among changes that a process applies only at its
// next start.
func Restart(changes []string) []string {
	var out []string
	for _, c := range changes {
		key, _, _ := strings.Cut(c, " ")
		if slices.Contains(restartKeys, key) {
			out = append(out, c)
			continue
		}
		// "butler garden: mcp_http, default_channel changed"
		name, keys, ok := strings.Cut(strings.TrimPrefix(c, "butler "), ": ")
		if key != "butler" || !ok {
			continue
		}
		var wait []string
		for _, k := range strings.Split(strings.TrimSuffix(keys, " changed"), ", ") {
			if slices.Contains(butlerRestartKeys, k) {
				wait = append(wait, k)
			}
		}
		if len(wait) > 0 {
			out = append(out, fmt.Sprintf("butler %s: %s changed", name, strings.Join(wait, ", ")))
		}
	}
	return out
}

// named compares two lists of named items: added, removed, and which keys of
// those in both changed.
func named[T any](kind string, old, new []T, name func(T) string) []string {
	var out []string
	have := map[string]T{}
	for _, x := range old {
		have[name(x)] = x
	}
	seen := map[string]bool{}
	for _, x := range new {
		n := name(x)
		seen[n] = true
		was, ok := have[n]
		if !ok {
			out = append(out, fmt.Sprintf("%s %s added", kind, n))
			continue
		}
		if keys := fieldsChanged(reflect.ValueOf(was), reflect.ValueOf(x)); len(keys) > 0 {
			out = append(out, fmt.Sprintf("%s %s: %s changed", kind, n, strings.Join(keys, ", ")))
		}
	}
	for _, x := range old {
		if n := name(x); !seen[n] {
			out = append(out, fmt.Sprintf("%s %s removed", kind, n))
		}
	}
	return out
}

// fieldsChanged names, by their yaml keys, the fields of two values of one
// struct type that differ, but those in skip. A field without a yaml key
// (a channel's own settings) is named "settings".
func fieldsChanged(a, b reflect.Value, skip ...string) []string {
	var out []string
	t := a.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		switch key {
		case "":
			key = strings.ToLower(f.Name)
		case "-":
			key = "settings"
		}
		if slices.Contains(skip, key) || same(a.Field(i), b.Field(i)) {
			continue
		}
		out = append(out, key)
	}
	return out
}

// same is reflect.DeepEqual of what a file sets: unexported fields (where
// in the file a value was, a parsed form kept beside it) are not compared,
// so a file whose lines only moved changes nothing.
func same(a, b reflect.Value) bool {
	if a.Kind() != b.Kind() || a.Type() != b.Type() {
		return false
	}
	switch a.Kind() {
	case reflect.Pointer, reflect.Interface:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() == b.IsNil()
		}
		return same(a.Elem(), b.Elem())
	case reflect.Struct:
		// Another module's type (time.Time) keeps its value unexported.
		if !strings.HasPrefix(a.Type().PkgPath(), "github.com/heraldhq/herald/") {
			break
		}
		for i := range a.NumField() {
			if a.Type().Field(i).IsExported() && !same(a.Field(i), b.Field(i)) {
				return false
			}
		}
		return true
	case reflect.Slice, reflect.Array:
		if a.Kind() == reflect.Slice && (a.IsNil() != b.IsNil()) && (a.Len() > 0 || b.Len() > 0) {
			return false
		}
		if a.Len() != b.Len() {
			return false
		}
		for i := range a.Len() {
			if !same(a.Index(i), b.Index(i)) {
				return false
			}
		}
		return true
	case reflect.Map:
		if a.Len() != b.Len() {
			return false
		}
		for _, k := range a.MapKeys() {
			bv := b.MapIndex(k)
			if !bv.IsValid() || !same(a.MapIndex(k), bv) {
				return false
			}
		}
		return true
	}
	if a.CanInterface() && b.CanInterface() {
		return reflect.DeepEqual(a.Interface(), b.Interface())
	}
	return false
}
