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
//
// A secret written into the file is refused where it is, and never shown:
// a key that is not a setting but has an _env key of its name (token:
// beside token_env) or the name of a secret (password:), and a value of a
// setting that holds no secret which looks like one (looksLikeSecret), are
// each told which _env key to name a variable in instead.
func checkKeys(root *yaml.Node) []problem {
	k := keyChecker{keep: namesIn(root)}
	k.check(root, []reflect.Type{reflect.TypeFor[Config]()}, "")
	return k.problems
}

type keyChecker struct {
	problems []problem
	// keep are the document's integration ids and butler names, which
	// may look like secrets and are none.
	keep []string
	// home is where a secret of the block being checked belongs.
	home secretHome
}

// secretHome is the _env key that names the variable a block's secret
// belongs in (a telegram integration's token_env), and what owns it, for
// envNameFor; key is "" where the block has none.
type secretHome struct{ owner, key string }

func (h secretHome) fix() string {
	if h.key == "" {
		return "put it in an environment variable and name it in the _env key that reads it (configuration.md lists them)"
	}
	return secretFix(h.key, envNameFor(h.owner, h.key))
}

var (
	butlerType     = reflect.TypeFor[Butler]()
	transcribeType = reflect.TypeFor[Transcribe]()
)

// homeOf is where a secret of block n, which holds the keys of structs,
// belongs: an integration's first _env key of its channel's, a butler's
// mcp_token_env, transcribe's api_key_env.
func homeOf(n *yaml.Node, structs []reflect.Type) (secretHome, bool) {
	switch {
	case slices.Contains(structs, integrationType):
		typ := mappingValue(n, "type")
		h := secretHome{owner: typ}
		if s := newSettings(typ); s != nil {
			EnvKeys(s, func(path, _ string) {
				if h.key == "" && !strings.Contains(path, ".") {
					h.key = path
				}
			})
		}
		return h, true
	case slices.Contains(structs, butlerType):
		return secretHome{owner: mappingValue(n, "name"), key: "mcp_token_env"}, true
	case slices.Contains(structs, transcribeType):
		return secretHome{owner: "transcribe", key: "api_key_env"}, true
	}
	return secretHome{}, false
}

// secretKeyWords are the words of a key that holds a secret.
var secretKeyWords = []string{"token", "secret", "password", "passwd", "api_key", "apikey", "credential"}

// unknownHint is what follows "KEY is not a setting" for key in a block
// of fields: the known key it is a typo of, or, for a key that would hold
// a secret, the _env key that names its variable instead.
func (k *keyChecker) unknownHint(key string, fields map[string][]reflect.Type) string {
	const never = "; a secret never goes in this file: "
	if _, ok := fields[key+"_env"]; ok {
		return never + secretFix(key+"_env", envNameFor(k.home.owner, key+"_env"))
	}
	if s := suggest(key, fields); s != "" {
		return s
	}
	lower := strings.ToLower(key)
	if slices.ContainsFunc(secretKeyWords, func(w string) bool { return strings.Contains(lower, w) }) {
		return never + k.home.fix()
	}
	return ""
}

// pasted reports whether n, the value of the setting at path, is a secret
// written where none goes: it looks like one, and it is no id or name
// (an integration's id may look random) and no variable's name or
// run.env value, which their own checks take (checkEnvNames, checkRun).
func (k *keyChecker) pasted(path string, n *yaml.Node) bool {
	if n.Kind != yaml.ScalarNode {
		return false
	}
	last := path[strings.LastIndex(path, ".")+1:]
	parent := strings.TrimSuffix(path, "."+last)
	if last == "id" || last == "name" || strings.HasSuffix(last, "_env") || strings.HasSuffix(parent, ".env") {
		return false
	}
	return secretWord(n.Value, k.keep)
}

// namesIn are the integration ids and butler names the document root
// writes.
func namesIn(root *yaml.Node) []string {
	var out []string
	for list, key := range map[string]string{"integrations": "id", "butlers": "name"} {
		seq := mappingNode(root, list)
		if seq == nil || deref(seq).Kind != yaml.SequenceNode {
			continue
		}
		for _, item := range deref(seq).Content {
			if v := mappingValue(item, key); v != "" {
				out = append(out, v)
			}
		}
	}
	return out
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
		if t.Kind() == reflect.String && k.pasted(path, n) {
			k.add(n.Line, path, "%s looks like a secret (not shown here), which never goes in this file: %s", path, k.home.fix())
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
	if h, ok := homeOf(n, structs); ok {
		outer := k.home
		k.home = h
		defer func() { k.home = outer }()
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
				k.add(key.Line, at, "%s is not a setting%s", at, k.unknownHint(key.Value, fields))
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
	if secretWord(n.Value, nil) {
		return "a value that looks like a secret (not shown here)"
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
