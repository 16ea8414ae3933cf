package config

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// checkKeys reports every key of the document that no setting has, every
// key written twice, and every value of the wrong kind (a word where a
// number goes, a list where one value goes), each with its line and path:
// a typo cannot silently switch a setting off, and every such mistake is
// found in one run. An integration's keys are its common ones and those of
// its channel type's settings. root is the document's top node.
func checkKeys(root *yaml.Node) []problem {
	var k keyChecker
	k.check(root, []reflect.Type{reflect.TypeFor[Config]()}, "")
	return k.problems
}

type keyChecker struct {
	problems []problem
}

// add records a problem at line whose key is path; the text leads with the
// path (or, for the whole file, says so).
func (k *keyChecker) add(line int, path, format string, a ...any) {
	k.problems = append(k.problems, problem{line: line, path: path, text: fmt.Sprintf(format, a...)})
}

var (
	integrationType = reflect.TypeFor[Integration]()
	inboundType     = reflect.TypeFor[Inbound]()
	unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()
	durationType    = reflect.TypeFor[time.Duration]()
)

// check walks n against the types whose keys it may hold (more than one where
// an integration's common keys and its channel's share a block).
func (k *keyChecker) check(n *yaml.Node, types []reflect.Type, path string) {
	n = deref(n)
	var structs, leaves []reflect.Type
	for _, t := range types {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch kind := t.Kind(); {
		case decodesItself(t):
			leaves = append(leaves, t)
		case kind == reflect.Struct && n.Kind == yaml.MappingNode:
			structs = append(structs, t)
		case (kind == reflect.Slice || kind == reflect.Array) && n.Kind == yaml.SequenceNode:
			for i, item := range n.Content {
				k.check(item, []reflect.Type{t.Elem()}, fmt.Sprintf("%s[%d]", path, i))
			}
		case kind == reflect.Map && n.Kind == yaml.MappingNode:
			k.duplicates(n, path)
			for i := 0; i+1 < len(n.Content); i += 2 {
				k.check(n.Content[i+1], []reflect.Type{t.Elem()}, join(path, n.Content[i].Value))
			}
		default:
			leaves = append(leaves, t)
		}
	}
	for _, t := range leaves {
		if err := n.Decode(reflect.New(t).Interface()); err != nil {
			k.wrongType(n, t, path, err)
			return
		}
	}
	if len(structs) > 0 {
		k.mapping(n, structs, path)
	}
}

// decodesItself reports whether values of t are read by their own
// UnmarshalYAML as a whole (a duration, grants), not key by key as the
// integration and its inbound block are.
func decodesItself(t reflect.Type) bool {
	return reflect.PointerTo(t).Implements(unmarshalerType) && t != integrationType && t != inboundType
}

// mapping checks the keys of block n, which holds the keys of structs.
func (k *keyChecker) mapping(n *yaml.Node, structs []reflect.Type, path string) {
	reportUnknown := true
	if slices.Contains(structs, integrationType) {
		typ := mappingValue(n, "type")
		s := newSettings(typ)
		if s == nil && typ != "" && !slices.Contains(ChannelTypes, typ) {
			// Its channel's keys are unknown until its type is right: name
			// the type, not each key it would have taken.
			types := map[string][]reflect.Type{}
			for _, t := range ChannelTypes {
				types[t] = nil
			}
			line, at := n.Line, join(path, "type")
			if v := mappingNode(n, "type"); v != nil {
				line = v.Line
			}
			k.add(line, at, "%s %q is not one of %s%s", at, typ, strings.Join(ChannelTypes, ", "), suggest(typ, types))
			reportUnknown = false
		}
		if s != nil {
			structs = append(structs, reflect.TypeOf(s))
		}
	}
	fields := map[string][]reflect.Type{}
	for _, t := range structs {
		yamlFields(t, fields)
	}
	k.duplicates(n, path)
	for i := 0; i+1 < len(n.Content); i += 2 {
		key := n.Content[i]
		at := join(path, key.Value)
		ft, ok := fields[key.Value]
		if !ok {
			if reportUnknown {
				k.add(key.Line, at, "%s is not a setting%s", at, suggest(key.Value, fields))
			}
			continue
		}
		k.check(n.Content[i+1], ft, at)
	}
}

// duplicates reports each key of block n written again after its first.
func (k *keyChecker) duplicates(n *yaml.Node, path string) {
	first := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key := n.Content[i]
		if line, ok := first[key.Value]; ok {
			at := join(path, key.Value)
			k.add(key.Line, at, "%s is written twice (first on line %d); keep one", at, line)
			continue
		}
		first[key.Value] = key.Line
	}
}

// linePrefix is the "line N: " a decoding error starts with.
var linePrefix = regexp.MustCompile(`^line ([0-9]+): `)

// wrongType reports that n, at path, cannot be decoded into t: err is what
// decoding said.
func (k *keyChecker) wrongType(n *yaml.Node, t reflect.Type, path string, err error) {
	line, subject := n.Line, path
	if path == "" {
		subject = "the configuration"
	}
	if decodesItself(t) {
		// Its own message says what is wrong: lead it with the path
		// instead of the key's bare name ("grants must be ...").
		msg := err.Error()
		if te := (*yaml.TypeError)(nil); errors.As(err, &te) && len(te.Errors) > 0 {
			msg = te.Errors[0]
		}
		if m := linePrefix.FindStringSubmatch(msg); m != nil {
			line, _ = strconv.Atoi(m[1])
			msg = msg[len(m[0]):]
		}
		last := path[strings.LastIndexAny(path, ".]")+1:]
		if rest, ok := strings.CutPrefix(msg, last+" "); ok && last != "" {
			msg = rest
		}
		k.add(line, path, "%s %s", subject, msg)
		return
	}
	var want string
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		want = "must be a whole number"
		if t == durationType {
			want = "must be a duration like 30s, 2m or 8h"
		}
	case reflect.Float32, reflect.Float64:
		want = "must be a number, like 5 or 0.5"
	case reflect.Bool:
		want = "must be true or false"
	case reflect.String:
		want = "must be one value (quote it if it holds a colon or #)"
	case reflect.Slice, reflect.Array:
		want = "must be a list (items on lines of their own led by \"- \", or [a, b])"
	case reflect.Struct, reflect.Map:
		want = "must be a block of keys (key: value lines indented under it, or { key: value })"
	default:
		want = "cannot be read: " + err.Error()
	}
	k.add(line, path, "%s %s, not %s", subject, want, shown(n))
}

// shown is how a message quotes the value written: the value, or what kind
// of thing it is.
func shown(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a block of keys"
	}
	return strconv.Quote(n.Value)
}

// deref follows aliases to the node they name.
func deref(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// yamlFields adds t's keys (by yaml tag; inline structs flattened) and the
// types of their values to fields.
func yamlFields(t reflect.Type, fields map[string][]reflect.Type) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
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

// mappingNode is the value of key in block n, nil if it has none.
func mappingNode(n *yaml.Node, key string) *yaml.Node {
	n = deref(n)
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

func mappingValue(n *yaml.Node, key string) string {
	if v := mappingNode(n, key); v != nil {
		return deref(v).Value
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
