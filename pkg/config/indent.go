package config

import (
	"fmt"
	"slices"
	"strings"
)

// indentHint finds the first line of a YAML document whose indentation fits
// no block around it, which the YAML parser often reports lines away (at the
// start of the enclosing list). It knows block mappings and lists, skips
// block scalars (| and >) and multi-line flow collections, and says nothing
// when it finds nothing wrong.
func indentHint(doc string) string {
	levels := []int{0}    // indentations of the enclosing blocks, innermost last
	opens := false        // the previous line opens a block (ends with ':')
	scalar, flow := -1, 0 // inside a block scalar more indented than this; open brackets
	for i, raw := range strings.Split(doc, "\n") {
		n := i + 1
		line := strings.TrimRight(raw, " \r")
		body := strings.TrimLeft(line, " ")
		ind := len(line) - len(body)
		if body == "" || strings.HasPrefix(body, "#") {
			continue
		}
		if scalar >= 0 {
			if ind > scalar {
				continue
			}
			scalar = -1
		}
		if flow > 0 {
			flow += strings.Count(body, "{") + strings.Count(body, "[") - strings.Count(body, "}") - strings.Count(body, "]")
			continue
		}
		if strings.HasPrefix(body, "\t") {
			return fmt.Sprintf("line %d is indented with a tab; YAML takes spaces only", n)
		}
		switch top := levels[len(levels)-1]; {
		case ind > top && !opens:
			return fmt.Sprintf("line %d is indented %d spaces, deeper than the line above, which opens no block (%s)", n, ind, levelsText(levels))
		case ind > top:
			levels = append(levels, ind)
		case ind < top:
			for len(levels) > 1 && levels[len(levels)-1] > ind {
				levels = levels[:len(levels)-1]
			}
			if levels[len(levels)-1] != ind {
				return fmt.Sprintf("line %d is indented %d spaces, which matches no block around it (%s)", n, ind, levelsText(append(levels, top)))
			}
		}
		// A list item's mapping continues at the column after "- ".
		item := body
		for strings.HasPrefix(item, "- ") {
			rest := strings.TrimLeft(item[2:], " ")
			ind += len(item) - len(rest)
			item = rest
			if strings.Contains(item, ": ") || strings.HasSuffix(item, ":") || strings.HasPrefix(item, "- ") {
				levels = append(levels, ind)
			}
		}
		value := stripComment(item)
		// "key: &anchor" and "key: !tag" open a block too.
		if f := strings.Fields(value); len(f) > 1 && (strings.HasPrefix(f[len(f)-1], "&") || strings.HasPrefix(f[len(f)-1], "!")) {
			value = strings.Join(f[:len(f)-1], " ")
		}
		opens = strings.HasSuffix(value, ":") || value == "-"
		if strings.HasSuffix(value, "|") || strings.HasSuffix(value, ">") || strings.HasSuffix(value, "|-") || strings.HasSuffix(value, ">-") {
			scalar = levels[len(levels)-1]
		}
		flow = strings.Count(value, "{") + strings.Count(value, "[") - strings.Count(value, "}") - strings.Count(value, "]")
	}
	return ""
}

// stripComment drops a trailing " # comment" outside quotes.
func stripComment(s string) string {
	quote := rune(0)
	for i, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote == 0 && (r == '"' || r == '\''):
			quote = r
		case quote == 0 && r == '#' && i > 0 && s[i-1] == ' ':
			return strings.TrimRight(s[:i], " ")
		}
	}
	return s
}

func levelsText(levels []int) string {
	var out []string
	for _, l := range slices.Compact(slices.Sorted(slices.Values(levels))) {
		out = append(out, fmt.Sprint(l))
	}
	return "blocks here are indented " + strings.Join(out, ", ")
}
