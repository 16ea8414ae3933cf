package telegramtest_test

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/heraldhq/herald/services/messenger/telegram/telegramtest"
)

func TestParseHTML(t *testing.T) {
	tests := []struct {
		name     string
		html     string
		text     string
		entities []telegramtest.Entity
		err      string // substring of the error; "" means valid
	}{
		{name: "plain", html: "hello", text: "hello"},
		{name: "entities", html: "a &lt;b&gt; &amp; &quot;c&quot; &#65;&#x42;", text: `a <b> & "c" AB`},
		{name: "stray ampersand is text", html: "fish & chips &nbsp;", text: "fish & chips &nbsp;"},
		{
			name: "bold and italic", html: "<b>bold</b> <i>it</i>", text: "bold it",
			entities: []telegramtest.Entity{{Type: "bold", Offset: 0, Length: 4}, {Type: "italic", Offset: 5, Length: 2}},
		},
		{
			name: "nested", html: "<b>a<i>b</i></b>", text: "ab",
			entities: []telegramtest.Entity{{Type: "bold", Offset: 0, Length: 2}, {Type: "italic", Offset: 1, Length: 1}},
		},
		{
			name: "link", html: `<a href="https://example.com/?a=1&amp;b=2">x</a>`, text: "x",
			entities: []telegramtest.Entity{{Type: "text_link", Offset: 0, Length: 1, URL: "https://example.com/?a=1&b=2"}},
		},
		{
			name: "pre with language", html: `<pre><code class="language-go">x := 1</code></pre>`, text: "x := 1",
			entities: []telegramtest.Entity{{Type: "pre", Offset: 0, Length: 6, Language: "go"}},
		},
		{
			name: "offsets in utf-16", html: "😀<b>x</b>", text: "😀x",
			entities: []telegramtest.Entity{{Type: "bold", Offset: 2, Length: 1}},
		},
		{
			name: "spoiler span", html: `<span class="tg-spoiler">s</span><tg-spoiler>t</tg-spoiler>`, text: "st",
			entities: []telegramtest.Entity{{Type: "spoiler", Offset: 0, Length: 1}, {Type: "spoiler", Offset: 1, Length: 1}},
		},
		{
			name: "expandable blockquote", html: "<blockquote expandable>q</blockquote>", text: "q",
			entities: []telegramtest.Entity{{Type: "expandable_blockquote", Offset: 0, Length: 1}},
		},
		{name: "all tags", html: "<strong>1</strong><em>2</em><u>3</u><ins>4</ins><s>5</s><strike>6</strike><del>7</del><code>8</code><blockquote>9</blockquote>", text: "123456789",
			entities: []telegramtest.Entity{
				{Type: "bold", Length: 1}, {Type: "italic", Offset: 1, Length: 1}, {Type: "underline", Offset: 2, Length: 1},
				{Type: "underline", Offset: 3, Length: 1}, {Type: "strikethrough", Offset: 4, Length: 1}, {Type: "strikethrough", Offset: 5, Length: 1},
				{Type: "strikethrough", Offset: 6, Length: 1}, {Type: "code", Offset: 7, Length: 1}, {Type: "blockquote", Offset: 8, Length: 1},
			}},
		{name: "unsupported tag", html: "a<br>b", err: `Unsupported start tag "br" at byte offset 1`},
		{name: "paragraph tag", html: "<p>x</p>", err: `Unsupported start tag "p"`},
		{name: "bare less-than", html: "1 < 2", err: `Unsupported start tag "" at byte offset 2`},
		{name: "unclosed", html: "<b>x", err: `Can't find end tag corresponding to start tag "b"`},
		{name: "crossed", html: "<b><i>x</b></i>", err: `Unmatched end tag at byte offset 7, expected "</i>", found "</b>"`},
		{name: "end without start", html: "x</b>", err: "Unexpected end tag at byte offset 1"},
		{name: "unclosed start tag", html: "<b", err: "Unclosed start tag"},
		{name: "span without class", html: "<span>x</span>", err: `Tag "span" must have class "tg-spoiler"`},
		{name: "attribute without value", html: "<a href>x</a>", err: "Expected equal sign"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text, entities, err := telegramtest.ParseHTML(tt.html)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("ParseHTML(%q) error = %v, want one containing %q", tt.html, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseHTML(%q): %v", tt.html, err)
			}
			if text != tt.text {
				t.Errorf("text = %q, want %q", text, tt.text)
			}
			if !slices.Equal(entities, tt.entities) {
				t.Errorf("entities:\n got %+v\nwant %+v", entities, tt.entities)
			}
		})
	}
}

func FuzzParseHTML(f *testing.F) {
	for _, s := range []string{"", "a", "<b>x</b>", "<a href='u'>l</a>", "&amp;&#128512;", "<pre><code class=\"language-go\">x</code></pre>", "<b><i>x</b>", "<blockquote expandable>q</blockquote>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, html string) {
		if !utf8.ValidString(html) {
			return
		}
		text, entities, err := telegramtest.ParseHTML(html)
		if err != nil {
			return
		}
		if !strings.ContainsAny(html, "<&") && text != html {
			t.Fatalf("text without markup changed: %q -> %q", html, text)
		}
		n := telegramtest.UTF16Len(text)
		for _, e := range entities {
			if e.Offset < 0 || e.Length <= 0 || e.Offset+e.Length > n {
				t.Fatalf("entity %+v outside text of %d units (%q)", e, n, html)
			}
		}
	})
}
