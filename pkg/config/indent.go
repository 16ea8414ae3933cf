package config

import (
	"fmt"
	"slices"
	"strings"
)

// indentHint finds the first line of a YAML document whose indentation fits
// no block around it, which the YAML parser often reports lines away (at the
// start of the enclosing list), and says what is wrong there: its line, and
// a text that starts with the key it holds. It knows block mappings and
// lists, skips block scalars (| and >) and multi-line flow collections, and
// says nothing (0, "") when it finds nothing wrong.
func indentHint(doc string) (int, string) {
	levels := []level{{}}   // the enclosing blocks, innermost last
	opens, key := false, "" // the previous line opens a block (ends with ':'), under its key
	scalar, flow := -1, 0   // inside a block scalar more indented than this; open brackets
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
			return n, fmt.Sprintf("%s is indented with a tab; YAML takes spaces only", lineKey(body))
		}
		dash := strings.HasPrefix(body, "- ") || body == "-"
		switch top := levels[len(levels)-1].ind; {
		case ind > top && !opens:
			return n, fmt.Sprintf("%s is indented %d spaces, deeper than the line above, which opens no block (%s)", lineKey(body), ind, levelsText(levels))
		case ind > top:
			levels = append(levels, level{ind: ind, list: dash, under: key})
		case ind == top && levels[len(levels)-1].list && !dash:
			return n, levels[len(levels)-1].outOfItem(lineKey(body), ind+2)
		case ind < top:
			inner := levels[len(levels)-1]
			for len(levels) > 1 && levels[len(levels)-1].ind > ind {
				inner = levels[len(levels)-1]
				levels = levels[:len(levels)-1]
			}
			if levels[len(levels)-1].ind != ind {
				return n, fmt.Sprintf("%s is indented %d spaces, which matches no block around it (%s)", lineKey(body), ind, levelsText(append(levels, inner)))
			}
			if l := levels[len(levels)-1]; l.list && !dash {
				return n, l.outOfItem(lineKey(body), inner.ind)
			}
		}
		// A list item's mapping continues at the column after "- ".
		item := body
		if dash {
			l := &levels[len(levels)-1]
			l.item, l.name = n, ""
		}
		for strings.HasPrefix(item, "- ") {
			rest := strings.TrimLeft(item[2:], " ")
			ind += len(item) - len(rest)
			item = rest
			if strings.Contains(item, ": ") || strings.HasSuffix(item, ":") || strings.HasPrefix(item, "- ") {
				levels = append(levels, level{ind: ind, list: strings.HasPrefix(item, "- ")})
			}
		}
		value := stripComment(item)
		k, v, _ := strings.Cut(value, ":")
		if len(levels) > 1 && (k == "id" || k == "name") && levels[len(levels)-2].list {
			if l := &levels[len(levels)-2]; l.name == "" {
				l.name = strings.Trim(strings.TrimSpace(v), `"'`)
			}
		}
		// "key: &anchor" and "key: !tag" open a block too.
		if f := strings.Fields(value); len(f) > 1 && (strings.HasPrefix(f[len(f)-1], "&") || strings.HasPrefix(f[len(f)-1], "!")) {
			value = strings.Join(f[:len(f)-1], " ")
		}
		opens, key = strings.HasSuffix(value, ":") || value == "-", strings.TrimSuffix(value, ":")
		if strings.HasSuffix(value, "|") || strings.HasSuffix(value, ">") || strings.HasSuffix(value, "|-") || strings.HasSuffix(value, ">-") {
			scalar = levels[len(levels)-1].ind
		}
		flow = strings.Count(value, "{") + strings.Count(value, "[") - strings.Count(value, "}") - strings.Count(value, "]")
	}
	return 0, ""
}

// level is a block indentHint is inside: the column of its lines, and for
// a list more indented than the key that holds it (whose every line at
// that column starts an item with "- "), that key, the line of its last
// item and the item's id or name.
type level struct {
	ind   int
	list  bool
	under string
	item  int
	name  string
}

// outOfItem says that key, written at the column of the list's "- ", is
// not under the list's last item, whose keys are indented keys spaces:
// `grants is not indented under integration tg_main (line 6): indent it
// like the integration's other keys, 4 spaces`.
func (l level) outOfItem(key string, keys int) string {
	what := map[string]string{"integrations": "integration", "butlers": "butler"}[l.under]
	if what == "" || l.name == "" {
		return fmt.Sprintf("%s is not indented under the item of %s on line %d: indent it like that item's other keys, %d spaces, or start a new item with \"- \"", key, l.under, l.item, keys)
	}
	return fmt.Sprintf("%s is not indented under %s %s (line %d): indent it like the %s's other keys, %d spaces", key, what, l.name, l.item, what, keys)
}

// lineKey is the key a line's text starts with (its whole text, cut at 40
// characters, if it holds none), to name the line by.
func lineKey(body string) string {
	body = strings.TrimLeft(body, " \t-")
	if k, _, ok := strings.Cut(body, ":"); ok && !strings.ContainsAny(k, " \"'{[") {
		return k
	}
	if len(body) > 40 {
		body = body[:40] + "…"
	}
	return fmt.Sprintf("%q", body)
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

func levelsText(levels []level) string {
	var inds []int
	for _, l := range levels {
		inds = append(inds, l.ind)
	}
	var out []string
	for _, l := range slices.Compact(slices.Sorted(slices.Values(inds))) {
		out = append(out, fmt.Sprint(l))
	}
	return "blocks here are indented " + strings.Join(out, ", ")
}
