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
	p := &htmlParser{text: text}
	for p.i < len(text) {
		var err error
		switch {
		case text[p.i] != '<':
			p.char()
		case p.at(p.i+1) == '/':
			err = p.endTag()
		default:
			err = p.startTag()
		}
		if err != nil {
			return "", nil, err
		}
	}
	if len(p.stack) > 0 {
		return "", nil, parseErr("Can't find end tag corresponding to start tag %q", p.stack[len(p.stack)-1].name)
	}
	entities := p.entities
	sort.SliceStable(entities, func(a, b int) bool {
		if entities[a].Offset != entities[b].Offset {
			return entities[a].Offset < entities[b].Offset
		}
		return entities[a].Length > entities[b].Length
	})
	return p.out.String(), entities, nil
}

// htmlParser is ParseHTML's state: text read up to byte i, the visible
// text so far (out, u16 its UTF-16 length), the entities of the tags
// closed and the tags open.
type htmlParser struct {
	text     string
	i        int
	out      strings.Builder
	u16      int
	entities []Entity
	stack    []openTag
}

// at is the byte at i, 0 past the end.
func (p *htmlParser) at(i int) byte {
	if i < len(p.text) {
		return p.text[i]
	}
	return 0
}

func (p *htmlParser) skipSpaces() {
	for p.i < len(p.text) && isSpace(p.text[p.i]) {
		p.i++
	}
}

// skipName moves past a name: up to a space, a '>' or a byte of stop.
func (p *htmlParser) skipName(stop string) {
	for p.i < len(p.text) && !isSpace(p.text[p.i]) && p.text[p.i] != '>' && strings.IndexByte(stop, p.text[p.i]) < 0 {
		p.i++
	}
}

// char reads one character of visible text, or a character entity.
func (p *htmlParser) char() {
	if p.text[p.i] == '&' {
		if r, n := decodeEntity(p.text[p.i:]); n > 0 {
			p.out.WriteRune(r)
			p.u16 += utf16.RuneLen(r)
			p.i += n
			return
		}
	}
	r, n := utf8.DecodeRuneInString(p.text[p.i:])
	p.out.WriteString(p.text[p.i : p.i+n])
	p.u16 += utf16.RuneLen(r)
	p.i += n
}

// startTag reads a start tag with its attributes, and opens it.
func (p *htmlParser) startTag() error {
	begin := p.i
	p.i++
	p.skipName("")
	if p.i >= len(p.text) {
		return parseErr("Unclosed start tag at byte offset %d", begin)
	}
	name := strings.ToLower(p.text[begin+1 : p.i])
	if _, ok := entityTypes[name]; !ok {
		return parseErr("Unsupported start tag %q at byte offset %d", name, begin)
	}
	var arg string
	for p.at(p.i) != '>' {
		p.skipSpaces()
		if p.at(p.i) == '>' {
			break
		}
		a, ok, err := p.attribute(name, begin)
		if err != nil {
			return err
		}
		if ok {
			arg = a
		}
	}
	p.i++ // '>'
	if name == "span" && arg != "spoiler" {
		return parseErr("Tag \"span\" must have class \"tg-spoiler\" at byte offset %d", begin)
	}
	p.stack = append(p.stack, openTag{name: name, arg: arg, offset: p.u16})
	return nil
}

// attribute reads one attribute of the start tag name at byte offset begin,
// and returns the tag's argument it gives, if it gives one (ok).
func (p *htmlParser) attribute(name string, begin int) (arg string, ok bool, err error) {
	attrBegin := p.i
	p.skipName("=")
	attr := p.text[attrBegin:p.i]
	if attr == "" {
		return "", false, parseErr("Empty attribute name in the tag %q at byte offset %d", name, begin)
	}
	p.skipSpaces()
	if p.at(p.i) != '=' {
		if name == "blockquote" && attr == "expandable" && p.at(p.i) == '>' {
			return "expandable", true, nil
		}
		return "", false, parseErr("Expected equal sign in declaration of an attribute of the tag %q at byte offset %d", name, begin)
	}
	p.i++
	p.skipSpaces()
	if p.i >= len(p.text) {
		return "", false, parseErr("Unclosed start tag %q at byte offset %d", name, begin)
	}
	value, err := p.attrValue()
	if err != nil {
		return "", false, err
	}
	if p.i >= len(p.text) {
		return "", false, parseErr("Unclosed start tag at byte offset %d", begin)
	}
	arg, ok = tagArg(name, attr, value)
	return arg, ok, nil
}

// attrValue reads an attribute's value: quoted, with character entities,
// or a name token.
func (p *htmlParser) attrValue() (string, error) {
	if q := p.text[p.i]; q == '"' || q == '\'' {
		p.i++
		var v strings.Builder
		for p.i < len(p.text) && p.text[p.i] != q {
			if p.text[p.i] == '&' {
				if r, n := decodeEntity(p.text[p.i:]); n > 0 {
					v.WriteRune(r)
					p.i += n
					continue
				}
			}
			v.WriteByte(p.text[p.i])
			p.i++
		}
		if p.i < len(p.text) {
			p.i++
		}
		return v.String(), nil
	}
	tokenBegin := p.i
	for p.i < len(p.text) && (isAlnum(p.text[p.i]) || p.text[p.i] == '.' || p.text[p.i] == '-') {
		p.i++
	}
	if c := p.at(p.i); !isSpace(c) && c != '>' {
		return "", parseErr("Unexpected end of name token at byte offset %d", tokenBegin)
	}
	return strings.ToLower(p.text[tokenBegin:p.i]), nil
}

// tagArg is the argument attribute attr="value" gives the tag name, if
// Telegram reads one from it (ok).
func tagArg(name, attr, value string) (arg string, ok bool) {
	switch {
	case name == "a" && attr == "href":
		return value, true
	case name == "code" && attr == "class" && strings.HasPrefix(value, "language-"):
		return value[len("language-"):], true
	case name == "span" && attr == "class" && strings.HasPrefix(value, "tg-"):
		return value[len("tg-"):], true
	case name == "tg-emoji" && attr == "emoji-id":
		return value, true
	case name == "blockquote" && attr == "expandable":
		return "expandable", true
	}
	return "", false
}

// endTag reads an end tag and closes the tag open last, making its entity.
func (p *htmlParser) endTag() error {
	begin := p.i
	if len(p.stack) == 0 {
		return parseErr("Unexpected end tag at byte offset %d", begin)
	}
	p.i++
	p.skipName("")
	endName := strings.ToLower(p.text[begin+2 : p.i])
	p.skipSpaces()
	if p.at(p.i) != '>' {
		return parseErr("Unclosed end tag at byte offset %d", begin)
	}
	p.i++
	top := p.stack[len(p.stack)-1]
	p.stack = p.stack[:len(p.stack)-1]
	if endName != "" && endName != top.name {
		return parseErr("Unmatched end tag at byte offset %d, expected \"</%s>\", found \"</%s>\"", begin, top.name, endName)
	}
	if length := p.u16 - top.offset; length > 0 {
		e := makeEntity(top, length, p.stack)
		// <pre><code class="language-go">…</code></pre> is one pre entity.
		if n := len(p.entities); n > 0 && e.Type == "pre" && top.name == "pre" &&
			p.entities[n-1].Type == "pre" && p.entities[n-1].Offset == e.Offset && p.entities[n-1].Length == e.Length {
			return nil
		}
		p.entities = append(p.entities, e)
	}
	return nil
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
