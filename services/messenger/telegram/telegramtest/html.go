package telegramtest

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Entity is a formatting span of a message, as Telegram returns it: offsets and
// lengths count UTF-16 code units of the visible text.
type Entity struct {
	Type     string `json:"type"`
	Offset   int    `json:"offset"`
	Length   int    `json:"length"`
	URL      string `json:"url,omitempty"`
	Language string `json:"language,omitempty"`
}

// entityTypes maps the supported start tags to the entity they make.
var entityTypes = map[string]string{
	"a":          "text_link",
	"b":          "bold",
	"strong":     "bold",
	"i":          "italic",
	"em":         "italic",
	"u":          "underline",
	"ins":        "underline",
	"s":          "strikethrough",
	"strike":     "strikethrough",
	"del":        "strikethrough",
	"tg-spoiler": "spoiler",
	"span":       "spoiler",
	"tg-emoji":   "custom_emoji",
	"pre":        "pre",
	"code":       "code",
	"blockquote": "blockquote",
}

type openTag struct {
	name   string
	arg    string
	offset int // UTF-16 offset of the tag's content
}

// ParseHTML parses text the way the Bot API parses parse_mode=HTML (it follows
// tdlib's parse_html): it returns the visible text and its entities, or the
// error Telegram answers after "Bad Request: can't parse entities: ". Unknown
// tags, unbalanced or crossed tags and a span without class tg-spoiler are
// errors; a stray '&' that starts no entity is kept as text, as Telegram does.
func ParseHTML(text string) (string, []Entity, error) {
	var (
		out      strings.Builder
		entities []Entity
		stack    []openTag
		u16      int // UTF-16 length of out
		i        int
	)
	at := func(i int) byte {
		if i < len(text) {
			return text[i]
		}
		return 0
	}
	skipSpaces := func() {
		for i < len(text) && isSpace(text[i]) {
			i++
		}
	}
	for i < len(text) {
		c := text[i]
		if c == '&' {
			if r, n := decodeEntity(text[i:]); n > 0 {
				out.WriteRune(r)
				u16 += utf16.RuneLen(r)
				i += n
				continue
			}
		}
		if c != '<' {
			r, n := utf8.DecodeRuneInString(text[i:])
			out.WriteString(text[i : i+n])
			u16 += utf16.RuneLen(r)
			i += n
			continue
		}

		begin := i
		i++
		if at(i) != '/' {
			for i < len(text) && !isSpace(text[i]) && text[i] != '>' {
				i++
			}
			if i >= len(text) {
				return "", nil, parseErr("Unclosed start tag at byte offset %d", begin)
			}
			name := strings.ToLower(text[begin+1 : i])
			if _, ok := entityTypes[name]; !ok {
				return "", nil, parseErr("Unsupported start tag %q at byte offset %d", name, begin)
			}
			var arg string
			for at(i) != '>' {
				skipSpaces()
				if at(i) == '>' {
					break
				}
				attrBegin := i
				for i < len(text) && !isSpace(text[i]) && text[i] != '=' && text[i] != '>' {
					i++
				}
				attr := text[attrBegin:i]
				if attr == "" {
					return "", nil, parseErr("Empty attribute name in the tag %q at byte offset %d", name, begin)
				}
				skipSpaces()
				if at(i) != '=' {
					if name == "blockquote" && attr == "expandable" && at(i) == '>' {
						arg = "expandable"
						continue
					}
					return "", nil, parseErr("Expected equal sign in declaration of an attribute of the tag %q at byte offset %d", name, begin)
				}
				i++
				skipSpaces()
				if i >= len(text) {
					return "", nil, parseErr("Unclosed start tag %q at byte offset %d", name, begin)
				}
				var value string
				if q := text[i]; q == '"' || q == '\'' {
					i++
					var v strings.Builder
					for i < len(text) && text[i] != q {
						if text[i] == '&' {
							if r, n := decodeEntity(text[i:]); n > 0 {
								v.WriteRune(r)
								i += n
								continue
							}
						}
						v.WriteByte(text[i])
						i++
					}
					if i < len(text) {
						i++
					}
					value = v.String()
				} else {
					tokenBegin := i
					for i < len(text) && (isAlnum(text[i]) || text[i] == '.' || text[i] == '-') {
						i++
					}
					value = strings.ToLower(text[tokenBegin:i])
					if c := at(i); !isSpace(c) && c != '>' {
						return "", nil, parseErr("Unexpected end of name token at byte offset %d", tokenBegin)
					}
				}
				if i >= len(text) {
					return "", nil, parseErr("Unclosed start tag at byte offset %d", begin)
				}
				switch {
				case name == "a" && attr == "href":
					arg = value
				case name == "code" && attr == "class" && strings.HasPrefix(value, "language-"):
					arg = value[len("language-"):]
				case name == "span" && attr == "class" && strings.HasPrefix(value, "tg-"):
					arg = value[len("tg-"):]
				case name == "tg-emoji" && attr == "emoji-id":
					arg = value
				case name == "blockquote" && attr == "expandable":
					arg = "expandable"
				}
			}
			i++ // '>'
			if name == "span" && arg != "spoiler" {
				return "", nil, parseErr("Tag \"span\" must have class \"tg-spoiler\" at byte offset %d", begin)
			}
			stack = append(stack, openTag{name: name, arg: arg, offset: u16})
			continue
		}

		// An end tag.
		if len(stack) == 0 {
			return "", nil, parseErr("Unexpected end tag at byte offset %d", begin)
		}
		for i < len(text) && !isSpace(text[i]) && text[i] != '>' {
			i++
		}
		endName := strings.ToLower(text[begin+2 : i])
		skipSpaces()
		if at(i) != '>' {
			return "", nil, parseErr("Unclosed end tag at byte offset %d", begin)
		}
		i++
		top := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if endName != "" && endName != top.name {
			return "", nil, parseErr("Unmatched end tag at byte offset %d, expected \"</%s>\", found \"</%s>\"", begin, top.name, endName)
		}
		if length := u16 - top.offset; length > 0 {
			e := makeEntity(top, length, stack)
			// <pre><code class="language-go">…</code></pre> is one pre entity.
			if n := len(entities); n > 0 && e.Type == "pre" && top.name == "pre" &&
				entities[n-1].Type == "pre" && entities[n-1].Offset == e.Offset && entities[n-1].Length == e.Length {
				continue
			}
			entities = append(entities, e)
		}
	}
	if len(stack) > 0 {
		return "", nil, parseErr("Can't find end tag corresponding to start tag %q", stack[len(stack)-1].name)
	}
	sort.SliceStable(entities, func(a, b int) bool {
		if entities[a].Offset != entities[b].Offset {
			return entities[a].Offset < entities[b].Offset
		}
		return entities[a].Length > entities[b].Length
	})
	return out.String(), entities, nil
}

func makeEntity(t openTag, length int, outer []openTag) Entity {
	e := Entity{Type: entityTypes[t.name], Offset: t.offset, Length: length}
	switch t.name {
	case "a":
		e.URL = t.arg
	case "code":
		// Code directly inside pre gives the pre block its language.
		if n := len(outer); n > 0 && outer[n-1].name == "pre" {
			e.Type, e.Language = "pre", t.arg
		}
	case "blockquote":
		if t.arg == "expandable" {
			e.Type = "expandable_blockquote"
		}
	}
	return e
}

// decodeEntity decodes the HTML entity at the start of s: the four named ones
// Telegram supports (&lt; &gt; &amp; &quot;) and numeric ones. It returns the
// rune and the bytes consumed, or 0, 0 if s does not start with one.
func decodeEntity(s string) (rune, int) {
	end := strings.IndexByte(s, ';')
	if end < 2 || end > 10 {
		return 0, 0
	}
	body := s[1:end]
	switch body {
	case "lt":
		return '<', end + 1
	case "gt":
		return '>', end + 1
	case "amp":
		return '&', end + 1
	case "quot":
		return '"', end + 1
	}
	if body[0] != '#' || len(body) < 2 {
		return 0, 0
	}
	var (
		n   uint64
		err error
	)
	if body[1] == 'x' || body[1] == 'X' {
		n, err = strconv.ParseUint(body[2:], 16, 32)
	} else {
		n, err = strconv.ParseUint(body[1:], 10, 32)
	}
	if err != nil || n == 0 || n > utf8.MaxRune || (n >= 0xD800 && n <= 0xDFFF) {
		return 0, 0
	}
	return rune(n), end + 1
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v'
}

func isAlnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// UTF16Len is the length of s in UTF-16 code units, the unit of Telegram's
// 4096-character limit.
func UTF16Len(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

// parseError is the text Telegram puts after "can't parse entities: ", kept
// verbatim (capitalised as Telegram writes it).
type parseError struct{ msg string }

func (e *parseError) Error() string { return e.msg }

func parseErr(format string, a ...any) error { return &parseError{fmt.Sprintf(format, a...)} }
