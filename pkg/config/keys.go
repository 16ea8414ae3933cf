package config

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// checkKeys reports every key of the document that no setting has, with its
// line, its path and the nearest known key, so a typo cannot silently switch
// a setting off. An integration's keys are its common ones and those of its
// channel type's settings.
func checkKeys(doc *yaml.Node) []string {
	var errs []string
	k := keyChecker{add: func(line int, format string, a ...any) {
		errs = append(errs, fmt.Sprintf("line %d: ", line)+fmt.Sprintf(format, a...))
	}}
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		doc = doc.Content[0]
	}
	k.check(doc, []reflect.Type{reflect.TypeFor[Config]()}, "")
	return errs
}

type keyChecker struct {
	add func(line int, format string, a ...any)
}

var (
	integrationType = reflect.TypeFor[Integration]()
	unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()
)

// check walks n against the types whose keys it may hold (more than one where
// an integration's common keys and its channel's share a block).
func (k keyChecker) check(n *yaml.Node, types []reflect.Type, path string) {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	var structs []reflect.Type
	for _, t := range types {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch t.Kind() {
		case reflect.Struct:
			structs = append(structs, t)
		case reflect.Slice, reflect.Array:
			if n.Kind == yaml.SequenceNode && !reflect.PointerTo(t).Implements(unmarshalerType) {
				for i, item := range n.Content {
					k.check(item, []reflect.Type{t.Elem()}, fmt.Sprintf("%s[%d]", path, i))
				}
			}
		case reflect.Map:
			if n.Kind == yaml.MappingNode {
				for i := 0; i+1 < len(n.Content); i += 2 {
					k.check(n.Content[i+1], []reflect.Type{t.Elem()}, join(path, n.Content[i].Value))
				}
			}
		}
	}
	if len(structs) == 0 || n.Kind != yaml.MappingNode {
		return
	}
	if slices.Contains(structs, integrationType) {
		typ := mappingValue(n, "type")
		s := newSettings(typ)
		if s == nil && typ != "" && !slices.Contains(ChannelTypes, typ) {
			// Its channel's keys are unknown until its type is right: name
			// the type, not each key it would have taken.
			line := n.Line
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == "type" {
					line = n.Content[i+1].Line
				}
			}
			types := map[string][]reflect.Type{}
			for _, t := range ChannelTypes {
				types[t] = nil
			}
			k.add(line, "%s %q is not one of %s%s", join(path, "type"), typ, strings.Join(ChannelTypes, ", "), suggest(typ, types))
			return
		}
		if s != nil {
			structs = append(structs, reflect.TypeOf(s))
		}
	}
	fields := map[string][]reflect.Type{}
	for _, t := range structs {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		yamlFields(t, fields)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key := n.Content[i]
		ft, ok := fields[key.Value]
		if !ok {
			k.add(key.Line, "%s is not a setting%s", join(path, key.Value), suggest(key.Value, fields))
			continue
		}
		k.check(n.Content[i+1], ft, join(path, key.Value))
	}
}

// yamlFields adds t's keys (by yaml tag; inline structs flattened) and the
// types of their values to fields.
func yamlFields(t reflect.Type, fields map[string][]reflect.Type) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		switch {
		case name == "-" || !f.IsExported():
		case strings.Contains(opts, "inline"):
			yamlFields(f.Type, fields)
		default:
			if name == "" {
				name = strings.ToLower(f.Name)
			}
			fields[name] = append(fields[name], f.Type)
		}
	}
}

func mappingValue(n *yaml.Node, key string) string {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1].Value
		}
	}
	return ""
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// suggest names the known key nearest to key, if one is near enough to be a
// typo of it.
func suggest(key string, fields map[string][]reflect.Type) string {
	best, bestD := "", 0
	for name := range fields {
		d := editDistance(strings.ToLower(key), name)
		if best == "" || d < bestD || (d == bestD && name < best) {
			best, bestD = name, d
		}
	}
	if best == "" || bestD > max(2, len(key)/3) {
		return ""
	}
	return fmt.Sprintf("; did you mean %s?", best)
}

// editDistance is the Levenshtein distance of a and b, by bytes (keys are
// ASCII).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
