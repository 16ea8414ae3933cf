package markdown_test

import (
	"fmt"
	"html"
	"slices"
	"strings"
)

// markup describes what one output dialect may contain.
type markup struct {
	tags     map[string][]string // tag name -> attributes it may carry
	void     map[string]bool     // tags that have no closing tag
	entities []string
	telegram bool // enforce Telegram's entity nesting rules
}

var (
	telegramMarkup = markup{
		tags: map[string][]string{
			"b": nil, "i": nil, "s": nil, "u": nil, "pre": nil, "blockquote": nil,
			"code": {"class"}, "a": {"href"},
		},
		entities: []string{"&amp;", "&lt;", "&gt;", "&quot;"},
		telegram: true,
	}
	htmlMarkup = markup{
		tags: map[string][]string{
			"p": nil, "strong": nil, "em": nil, "del": nil, "pre": nil, "blockquote": nil,
			"h1": nil, "h2": nil, "h3": nil, "h4": nil, "h5": nil, "h6": nil,
			"ul": nil, "li": nil, "br": nil, "hr": nil,
			"code": {"class"}, "a": {"href"}, "ol": {"start"},
		},
		void:     map[string]bool{"br": true, "hr": true},
		entities: []string{"&amp;", "&lt;", "&gt;", "&quot;", "&#39;"},
	}
)

// visibleText checks that s is well-formed in dialect m — every "<" begins
// an allowed tag with allowed, quoted attributes, tags nest properly, every
// "&" begins a known entity — and returns the text a reader sees.
func visibleText(s string, m markup) (string, error) {
	var text strings.Builder
	var stack []string
	for i := 0; i < len(s); {
		switch s[i] {
		case '>':
			return "", fmt.Errorf("raw '>' at %d", i)
		case '&':
			j := strings.IndexByte(s[i:], ';')
			if j < 0 || !slices.Contains(m.entities, s[i:i+j+1]) {
				return "", fmt.Errorf("bad entity at %d: %.12q", i, s[i:])
			}
			text.WriteString(html.UnescapeString(s[i : i+j+1]))
			i += j + 1
		case '<':
			j := strings.IndexByte(s[i:], '>')
			if j < 0 {
				return "", fmt.Errorf("unterminated tag at %d", i)
			}
			tag := s[i+1 : i+j]
			if name, ok := strings.CutPrefix(tag, "/"); ok {
				if len(stack) == 0 || stack[len(stack)-1] != name {
					return "", fmt.Errorf("</%s> at %d closes %v", name, i, stack)
				}
				stack = stack[:len(stack)-1]
			} else {
				name, attrs, _ := strings.Cut(tag, " ")
				allowed, ok := m.tags[name]
				if !ok {
					return "", fmt.Errorf("tag <%s> not allowed", tag)
				}
				if err := checkAttrs(attrs, allowed); err != nil {
					return "", fmt.Errorf("tag <%s>: %w", tag, err)
				}
				if m.telegram {
					if err := telegramNesting(stack, name); err != nil {
						return "", err
					}
				}
				if !m.void[name] {
					stack = append(stack, name)
				}
			}
			i += j + 1
		default:
			text.WriteByte(s[i])
			i++
		}
	}
	if len(stack) > 0 {
		return "", fmt.Errorf("unclosed %v", stack)
	}
	return text.String(), nil
}

func checkAttrs(attrs string, allowed []string) error {
	for attrs != "" {
		name, rest, ok := strings.Cut(attrs, `="`)
		if !ok || !slices.Contains(allowed, name) {
			return fmt.Errorf("attribute %q not allowed", attrs)
		}
		value, rest, ok := strings.Cut(rest, `"`)
		if !ok || strings.ContainsAny(value, "<>") {
			return fmt.Errorf("bad value of %s", name)
		}
		if rest != "" && !strings.HasPrefix(rest, " ") {
			return fmt.Errorf("junk after %s", name)
		}
		attrs = strings.TrimPrefix(rest, " ")
	}
	return nil
}

// telegramNesting applies the Bot API's rules: pre and code hold nothing but
// text (except pre's own code), links hold no code and no links, quotes do
// not nest.
func telegramNesting(stack []string, name string) error {
	top := ""
	if len(stack) > 0 {
		top = stack[len(stack)-1]
	}
	switch {
	case top == "pre" && name == "code":
		return nil
	case slices.Contains(stack, "pre") || slices.Contains(stack, "code"):
		return fmt.Errorf("<%s> inside %v", name, stack)
	case name == "pre" && len(stack) > 0 && !slices.Equal(stack, []string{"blockquote"}):
		return fmt.Errorf("<pre> inside %v", stack)
	case (name == "a" || name == "code") && slices.Contains(stack, "a"):
		return fmt.Errorf("<%s> inside %v", name, stack)
	case name == "blockquote" && slices.Contains(stack, "blockquote"):
		return fmt.Errorf("nested blockquote")
	}
	return nil
}
