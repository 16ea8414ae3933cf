package config

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// problem is one thing wrong with a configuration file: the line it is on
// (0: not in the file, such as a default), the path of the key at fault and
// the message, which starts with that path and says what to write instead.
type problem struct {
	line int
	path string
	text string
}

func (p problem) String() string {
	if p.line > 0 {
		return fmt.Sprintf("line %d: %s", p.line, p.text)
	}
	return p.text
}

// invalid is the error of problems: every one, a line each, in the order
// of the file (those on no line last).
func invalid(probs []problem) error {
	slices.SortStableFunc(probs, func(a, b problem) int {
		return cmp.Compare(lineOrLast(a.line), lineOrLast(b.line))
	})
	lines := make([]string, 0, len(probs))
	for _, p := range probs {
		if s := p.String(); !slices.Contains(lines, s) {
			lines = append(lines, s)
		}
	}
	return fmt.Errorf("%w:\n  %s", ErrInvalid, strings.Join(lines, "\n  "))
}

func lineOrLast(line int) int {
	if line == 0 {
		return int(^uint(0) >> 1)
	}
	return line
}

// placed are Validate's messages as problems of the file whose top node is
// root (nil: no file): each at the line of the key its message starts with.
// A message about a key already found unknown or of the wrong type, or
// about the block holding one, is left out: it would say the same again.
func placed(root *yaml.Node, msgs []string, found []problem) []problem {
	var out []problem
	for _, msg := range msgs {
		branch, path := subjectOf(msg)
		if slices.ContainsFunc(found, func(p problem) bool { return onBranch(p.path, branch) }) {
			continue
		}
		out = append(out, problem{line: lineOf(root, path), path: branch, text: msg})
	}
	return out
}

// subjectOf is the key path a message of Validate starts with, as branch,
// and the path whose line it is on. They differ for a problem of an
// integration's channel settings, `integrations[0] (telegram tg): api_url
// ...`: its branch is integrations[0], its path integrations[0].api_url
// (a word that names no key, as in "needs token_env", leaves the
// integration's own line).
func subjectOf(msg string) (branch, path string) {
	branch = leadingPath(msg)
	path = branch
	if rest, ok := strings.CutPrefix(msg[len(branch):], " ("); ok {
		if _, after, ok := strings.Cut(rest, "): "); ok {
			if sub := leadingPath(after); sub != "" {
				path = branch + "." + sub
			}
		}
	}
	return branch, path
}

// leadingPath is the key path s starts with: up to the first character
// that is none of a path's (letters, digits, _ - . [ ]).
func leadingPath(s string) string {
	end := strings.IndexFunc(s, func(r rune) bool {
		return !(r == '_' || r == '-' || r == '.' || r == '[' || r == ']' ||
			'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9')
	})
	if end < 0 {
		end = len(s)
	}
	return strings.TrimRight(s[:end], ".")
}

// onBranch reports whether paths a and b are one key or one holds the
// other (butlers[0] holds butlers[0].name); an empty path is no key.
func onBranch(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	holds := func(outer, inner string) bool {
		rest, ok := strings.CutPrefix(inner, outer)
		return ok && (rest == "" || rest[0] == '.' || rest[0] == '[')
	}
	return holds(a, b) || holds(b, a)
}

// lineOf is the line of the deepest node of the document whose top node is
// root that path ("integrations[1].inbound.rate_limit") leads to: the
// value's line for a key of one value, the key's line for a key holding a
// block or list, the item's line for a list item. 0 if not even the first
// key of path is in the document.
func lineOf(root *yaml.Node, path string) int {
	if root == nil || path == "" {
		return 0
	}
	parts := strings.Split(path, ".")
	n, line := root, 0
	for i := 0; i < len(parts); i++ {
		key, idx := splitIndexes(parts[i])
		val, at := lookup(n, key)
		for j := i + 1; val == nil && j < len(parts); j++ {
			// A key with dots in it (a webhook's recipient "ops.eu").
			key, idx = splitIndexes(strings.Join(parts[i:j+1], "."))
			if val, at = lookup(n, key); val != nil {
				i = j
			}
		}
		if val == nil {
			return line
		}
		n, line = val, at
		for _, x := range idx {
			n = deref(n)
			if n.Kind != yaml.SequenceNode || x >= len(n.Content) {
				return line
			}
			n, line = n.Content[x], n.Content[x].Line
		}
	}
	return line
}

// splitIndexes splits "approvers[0]" into approvers and [0]; a part that is
// not key[N]... is a key as it is.
func splitIndexes(part string) (string, []int) {
	key, rest, ok := strings.Cut(part, "[")
	if !ok {
		return part, nil
	}
	var idx []int
	for _, s := range strings.Split(rest, "[") {
		x, err := strconv.Atoi(strings.TrimSuffix(s, "]"))
		if err != nil || !strings.HasSuffix(s, "]") {
			return part, nil
		}
		idx = append(idx, x)
	}
	return key, idx
}

// lookup is the value of key in block n (or in a block merged into it with
// <<) and the line lineOf takes for it; nil if n has no such key.
func lookup(n *yaml.Node, key string) (*yaml.Node, int) {
	n = deref(n)
	if n.Kind != yaml.MappingNode {
		return nil, 0
	}
	var merged []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		switch {
		case k.Value == key:
			if deref(v).Kind == yaml.ScalarNode {
				return v, v.Line
			}
			return v, k.Line
		case k.Tag == "!!merge" || k.Value == "<<":
			if v = deref(v); v.Kind == yaml.SequenceNode {
				merged = append(merged, v.Content...)
			} else {
				merged = append(merged, v)
			}
		}
	}
	for _, m := range merged {
		if v, line := lookup(m, key); v != nil {
			return v, line
		}
	}
	return nil, 0
}

// undecoded are the decoder's complaints (err) at lines where checkKeys
// found nothing: none, unless the two disagree; nothing is left unsaid.
func undecoded(err error, found []problem) []problem {
	if err == nil {
		return nil
	}
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return []problem{{text: err.Error()}}
	}
	var out []problem
	for _, e := range te.Errors {
		line := 0
		if m := linePrefix.FindStringSubmatch(e); m != nil {
			line, _ = strconv.Atoi(m[1])
			e = e[len(m[0]):]
		}
		if !slices.ContainsFunc(found, func(p problem) bool { return p.line == line }) {
			out = append(out, problem{line: line, text: e})
		}
	}
	return out
}

// joinTypeErrors is errs as one *yaml.TypeError, which lets the decoder go
// on to the next value where any other error would stop it; an error of
// another kind is returned as it is.
func joinTypeErrors(errs ...error) error {
	var all []string
	for _, err := range errs {
		var te *yaml.TypeError
		switch {
		case err == nil:
		case errors.As(err, &te):
			all = append(all, te.Errors...)
		default:
			return err
		}
	}
	if len(all) == 0 {
		return nil
	}
	return &yaml.TypeError{Errors: all}
}

// typeError is a decoding problem at n that lets the decoder go on.
func typeError(n *yaml.Node, format string, a ...any) error {
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: ", n.Line) + fmt.Sprintf(format, a...)}}
}
