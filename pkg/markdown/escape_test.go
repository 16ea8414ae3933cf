package markdown_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/heraldhq/herald/pkg/channel/telegram"
	"github.com/heraldhq/herald/pkg/markdown"
)

func TestEscape(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string // the markdown
	}{
		{"plain text unchanged", "Run shell command", "Run shell command"},
		{"bold", "**x**", `\*\*x\*\*`},
		{"italic underscores", "_x_ and snake_case", `\_x\_ and snake\_case`},
		{"strike", "~~x~~", `\~\~x\~\~`},
		{"code span", "`rm -rf /`", "\\`rm -rf /\\`"},
		{"link", "[link](http://evil)", `\[link\](http\://evil)`},
		{"bare url", "see https://evil.example/x", `see https\://evil.example/x`},
		{"autolink", "<https://evil>", `\<https\://evil>`},
		{"html", "<b>bold</b>", `\<b>bold\</b>`},
		{"heading", "# title", `\# title`},
		{"hashtag stays", "#tag", "#tag"},
		{"bullet", "- item", `\- item`},
		{"plus bullet", "+ item", `\+ item`},
		{"negative number stays", "-5 degrees", "-5 degrees"},
		{"ordered item", "1. item", `1\. item`},
		{"ordered item with paren", "12) item", `12\) item`},
		{"decimal stays", "3.14 is pi", "3.14 is pi"},
		{"quote", "> quoted", `\> quoted`},
		{"indented quote", "  > quoted", `  \> quoted`},
		{"rule", "---", `\---`},
		{"fence", "```go", "\\`\\`\\`go"},
		{"tilde fence", "~~~", `\~\~\~`},
		{"backslash before punctuation", `\*`, `\\\*`},
		{"backslash before a letter stays", `C:\Users`, `C:\Users`},
		{"trailing backslash", `dir\`, `dir\\`},
		{"line breaks become spaces", "one\ntwo\r\nthree\rfour", "one two three four"},
		{"block after a line break is inline", "a\n# b", "a # b"},
		{"ampersand and quotes stay", `Tom & "Jerry"`, `Tom & "Jerry"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := markdown.Escape(tt.in)
			if got != tt.want {
				t.Errorf("Escape(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if err := checkLiteral(tt.in, got); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestEscapeRendersLiterally(t *testing.T) {
	tests := []struct {
		name string
		in   string
		tg   string // its Telegram HTML
		html string // its email HTML
	}{
		{"markdown", "**x** _y_ `z`", "**x** _y_ `z`", "<p>**x** _y_ `z`</p>"},
		{"html", "<b>x</b>", "&lt;b&gt;x&lt;/b&gt;", "<p>&lt;b&gt;x&lt;/b&gt;</p>"},
		{"link", "[link](http://evil)", "[link](http://evil)", "<p>[link](http://evil)</p>"},
		{"autolink", "<https://evil>", "&lt;https://evil&gt;", "<p>&lt;https://evil&gt;</p>"},
		{"heading", "# x", "# x", "<p># x</p>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			md := markdown.Escape(tt.in)
			if got := telegram.HTML(md); got != tt.tg {
				t.Errorf("TelegramHTML(Escape(%q)) = %q, want %q", tt.in, got, tt.tg)
			}
			if got := markdown.HTML(md); got != tt.html {
				t.Errorf("HTML(Escape(%q)) = %q, want %q", tt.in, got, tt.html)
			}
		})
	}
}

func TestCodeBlock(t *testing.T) {
	tests := []struct {
		name string
		code string
		want string // its Telegram HTML
	}{
		{"plain", "ls -l", "<pre>ls -l</pre>"},
		{"escaped", "a < b && c > d", "<pre>a &lt; b &amp;&amp; c &gt; d</pre>"},
		{"markdown stays", "**x** [l](https://x.y)", "<pre>**x** [l](https://x.y)</pre>"},
		{"a fence inside does not close it", "echo\n```\n**out**", "<pre>echo\n```\n**out**</pre>"},
		{"a longer fence inside does not close it", "`````\nx\n  ``````", "<pre>`````\nx\n  ``````</pre>"},
		{"a tilde fence inside", "~~~\nx\n~~~", "<pre>~~~\nx\n~~~</pre>"},
		{"inline backticks", "a ``b`` c", "<pre>a ``b`` c</pre>"},
		{"blank lines kept", "a\n\n\nb", "<pre>a\n\n\nb</pre>"},
		{"trailing blank dropped", "a  \n\n", "<pre>a</pre>"},
		{"carriage returns", "a\r\nb\rc", "<pre>a\nb\nc</pre>"},
		{"empty shows nothing", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			md := markdown.CodeBlock(tt.code)
			if got := telegram.HTML(md); got != tt.want {
				t.Errorf("TelegramHTML(CodeBlock(%q)) = %q, want %q", tt.code, got, tt.want)
			}
			if err := checkCode(tt.code, md); err != nil {
				t.Error(err)
			}
		})
	}
}

// FuzzEscape holds Escape to its promise: every renderer the channels use
// shows the escaped text as exactly the text (as a line shows it: line
// breaks as spaces, the ends trimmed), with no markup of its own, on its own
// and between a writer's bold markers.
func FuzzEscape(f *testing.F) {
	for _, s := range seeds {
		f.Add(s)
	}
	for _, s := range []string{"1. x", "- x", "> x", "# x", "---", "a\\", "\\*", "https://x.y", " \u00a0# x", "x\n\n# y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if err := checkLiteral(s, markdown.Escape(s)); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzCodeBlock: whatever the code, it shows as one code block holding
// exactly it, and markdown after the block is rendered after it.
func FuzzCodeBlock(f *testing.F) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Add("```\n**x**\n```\n````")
	f.Add("  ```\n\r```")
	f.Fuzz(func(t *testing.T, code string) {
		if err := checkCode(code, markdown.CodeBlock(code)); err != nil {
			t.Fatal(err)
		}
	})
}

// literal is what a line made of s shows.
func literal(s string) string {
	s = strings.NewReplacer("\r\n", " ", "\r", " ", "\n", " ").Replace(s)
	return strings.TrimSpace(strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD"))
}

// checkLiteral says how md, Escape(s), fails to show s literally.
func checkLiteral(s, md string) error {
	want := literal(s)
	tg := telegram.HTML(md)
	if got, err := visibleText(tg, telegramMarkup); err != nil || got != want || strings.Contains(tg, "<") {
		return fmt.Errorf("TelegramHTML(Escape(%.300q)) = %.300q, want the text %.300q and no tags", s, tg, want)
	}
	h := markdown.HTML(md)
	inner := strings.TrimSuffix(strings.TrimPrefix(h, "<p>"), "</p>")
	if got, err := visibleText(h, htmlMarkup); err != nil || got != want || strings.Contains(inner, "<") {
		return fmt.Errorf("HTML(Escape(%.300q)) = %.300q, want <p> around the text %.300q", s, h, want)
	}
	if want == "" {
		return nil
	}
	// A writer puts it in bold: the markers pair, and nothing inside moves.
	bold := "**" + markdown.Escape(want) + "**"
	if got := telegram.HTML(bold); got != "<b>"+tg+"</b>" {
		return fmt.Errorf("TelegramHTML(%.300q) = %.300q, want <b> around %.300q", bold, got, tg)
	}
	return nil
}

// checkCode says how md, CodeBlock(code), fails to show code as one code
// block that markdown after it cannot enter.
func checkCode(code, md string) error {
	want := strings.ReplaceAll(strings.ToValidUTF8(code, "\uFFFD"), "\x00", "\uFFFD")
	want = strings.NewReplacer("\r\n", "\n", "\r", "\n").Replace(want)
	want = strings.TrimRight(want, " \t\n")

	tg := telegram.HTML(md + "\n\n**after**")
	body, ok := strings.CutSuffix(tg, "<b>after</b>")
	body = strings.TrimSuffix(body, "\n\n")
	inner, ok1 := strings.CutPrefix(body, "<pre>")
	inner, ok2 := strings.CutSuffix(inner, "</pre>")
	if want == "" {
		ok1, ok2 = body == "", body == ""
	}
	if got, err := visibleText(body, telegramMarkup); !ok || !ok1 || !ok2 || err != nil || got != want || strings.Contains(inner, "<") {
		return fmt.Errorf("TelegramHTML(CodeBlock(%.300q) + a paragraph) = %.300q, want one <pre> holding %.300q, then the paragraph", code, tg, want)
	}

	h := markdown.HTML(md + "\n\n**after**")
	body, ok = strings.CutSuffix(h, "<p><strong>after</strong></p>")
	body = strings.TrimSuffix(body, "\n")
	inner, ok1 = strings.CutPrefix(body, "<pre><code>")
	inner, ok2 = strings.CutSuffix(inner, "</code></pre>")
	if got, err := visibleText(body, htmlMarkup); !ok || !ok1 || !ok2 || err != nil || got != want || strings.Contains(inner, "<") {
		return fmt.Errorf("HTML(CodeBlock(%.300q) + a paragraph) = %.300q, want one <pre><code> holding %.300q, then the paragraph", code, h, want)
	}
	return nil
}
