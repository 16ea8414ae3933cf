package telegram_test

import (
	"testing"

	"github.com/heraldhq/herald/pkg/channel/telegram"
)

func TestHTML(t *testing.T) {
	tests := []struct {
		name string
		md   string
		want string
	}{
		{"empty", "", ""},
		{"plain", "hello world", "hello world"},
		{"bold stars", "**bold**", "<b>bold</b>"},
		{"bold underscores", "__bold__", "<b>bold</b>"},
		{"italic star", "*it*", "<i>it</i>"},
		{"italic underscore", "_it_", "<i>it</i>"},
		{"bold italic", "***both***", "<i><b>both</b></i>"},
		{"bold inside italic", "*a **b** c*", "<i>a <b>b</b> c</i>"},
		{"strike", "~~gone~~", "<s>gone</s>"},
		{"single tilde is text", "~5 min", "~5 min"},
		{"inline code", "run `go test`", "run <code>go test</code>"},
		{"markdown inside code is literal", "`**x** <b>`", "<code>**x** &lt;b&gt;</code>"},
		{"double backtick code", "`` a`b ``", "<code>a`b</code>"},
		{"link", "[docs](https://go.dev/doc)", `<a href="https://go.dev/doc">docs</a>`},
		{"link with formatting", "[**docs**](http://x.y)", `<a href="http://x.y"><b>docs</b></a>`},
		{"link code is plain in telegram", "[`f`](https://x.y)", `<a href="https://x.y">f</a>`},
		{"mailto link", "[mail](mailto:a@b.c)", `<a href="mailto:a@b.c">mail</a>`},
		{"tg resolve link", "[bot](tg://resolve?domain=herald_bot)", `<a href="tg://resolve?domain=herald_bot">bot</a>`},
		{"tg proxy link is text", "[fast](tg://proxy?server=evil.example&port=443&secret=ab)", "fast"},
		{"tg socks link is text", "[fast](TG://socks?server=evil.example&port=1080)", "fast"},
		{"tg user link is text", "[me](tg://user?id=1)", "me"},
		{"javascript link is text", "[click](javascript:alert(1))", "click"},
		{"relative link is text", "[x](/etc/passwd)", "x"},
		{"quote in href escaped", `[x](https://a.b/"onmouseover=)`, `<a href="https://a.b/&quot;onmouseover=">x</a>`},
		{"ampersand in href escaped", "[x](https://a.b/?a=1&b=2)", `<a href="https://a.b/?a=1&amp;b=2">x</a>`},
		{"link with parens", "[w](https://en.wikipedia.org/wiki/Go_(language))", `<a href="https://en.wikipedia.org/wiki/Go_(language)">w</a>`},
		{"autolink", "<https://x.y/z>", `<a href="https://x.y/z">https://x.y/z</a>`},
		{"bare url keeps underscores", "see https://x.y/__init__.py.", "see https://x.y/__init__.py."},
		{"script escaped", "<script>alert('x')</script>", "&lt;script&gt;alert('x')&lt;/script&gt;"},
		{"ampersand escaped", "Tom & Jerry &amp; co", "Tom &amp; Jerry &amp;amp; co"},
		{"quotes in text stay", `say "hi"`, `say "hi"`},
		{"snake case literal", "call snake_case_name now", "call snake_case_name now"},
		{"lone star literal", "2 * 3 = 6", "2 * 3 = 6"},
		{"unclosed bold literal", "**not closed", "**not closed"},
		{"unclosed backtick literal", "a ` b", "a ` b"},
		{"escaped star", `\*not italic\*`, "*not italic*"},
		{"heading", "# Title", "<b>Title</b>"},
		{"heading with bold", "## A **b** c ##", "<b>A b c</b>"},
		{"hashtag is text", "#golang", "#golang"},
		{"paragraphs", "one\n\n\n\ntwo", "one\n\ntwo"},
		{"line break", "one\ntwo", "one\ntwo"},
		{"bullets", "- a\n* b\n+ c", "- a\n- b\n- c"},
		{"ordered", "1. a\n2. b", "1. a\n2. b"},
		{"nested list", "- a\n  - b\n- c", "- a\n  - b\n- c"},
		{"list after text", "Steps:\n1. **go**", "Steps:\n\n1. <b>go</b>"},
		{"fence with language", "```go\nx := a < b && c\n```", `<pre><code class="language-go">x := a &lt; b &amp;&amp; c</code></pre>`},
		{"fence without language", "```\n**raw**\n```", "<pre>**raw**</pre>"},
		{"unclosed fence runs to end", "```\ncode\nmore", "<pre>code\nmore</pre>"},
		{"odd language dropped", "```<x>\ny\n```", "<pre>y</pre>"},
		{"quote", "> quoted *text*\n> more", "<blockquote>quoted <i>text</i>\nmore</blockquote>"},
		{"nested quote flattened", "> a\n>> b", "<blockquote>a\n\nb</blockquote>"},
		{"rule", "a\n\n---\n\nb", "a\n\n---\n\nb"},
		{"crlf", "a\r\nb", "a\nb"},
		{"invalid utf8", "a\xffb", "a\uFFFDb"},
		{"emoji", "**🦀 rust**", "<b>🦀 rust</b>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := telegram.HTML(tt.md); got != tt.want {
				t.Errorf("HTML(%q)\n got: %q\nwant: %q", tt.md, got, tt.want)
			}
		})
	}
}
