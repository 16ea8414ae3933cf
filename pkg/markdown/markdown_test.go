package markdown_test

import (
	"testing"

	"github.com/heraldhq/herald/pkg/markdown"
)

func TestHTML(t *testing.T) {
	tests := []struct {
		name string
		md   string
		want string
	}{
		{"empty", "", ""},
		{"paragraph", "hello", "<p>hello</p>"},
		{"paragraphs", "a\n\nb", "<p>a</p>\n<p>b</p>"},
		{"line break", "a\nb", "<p>a<br>\nb</p>"},
		{"emphasis", "**b** *i* ~~s~~ `c`", "<p><strong>b</strong> <em>i</em> <del>s</del> <code>c</code></p>"},
		{"link", "[x](https://a.b)", `<p><a href="https://a.b">x</a></p>`},
		{"link code", "[`x`](https://a.b)", `<p><a href="https://a.b"><code>x</code></a></p>`},
		{"bare url is a link", "go to https://a.b/c_d.", `<p>go to <a href="https://a.b/c_d">https://a.b/c_d</a>.</p>`},
		{"javascript link is text", "[x](javascript:alert(1))", "<p>x</p>"},
		{"data link is text", "[x](data:text/html,<b>)", "<p>x</p>"},
		{"escaping", `<img src=x onerror="y"> & 'q'`, "<p>&lt;img src=x onerror=&quot;y&quot;&gt; &amp; &#39;q&#39;</p>"},
		{"headings", "# a\n###### f", "<h1>a</h1>\n<h6>f</h6>"},
		{"seven hashes is text", "####### x", "<p>####### x</p>"},
		{"unordered", "- a\n- b", "<ul>\n<li>a</li>\n<li>b</li>\n</ul>"},
		{"ordered with start", "3. a\n4. b", "<ol start=\"3\">\n<li>a</li>\n<li>b</li>\n</ol>"},
		{"nested", "1. a\n   - b\n2. c", "<ol>\n<li>a\n<ul>\n<li>b</li>\n</ul></li>\n<li>c</li>\n</ol>"},
		{"loose list stays one list", "- a\n\n- b", "<ul>\n<li>a</li>\n<li>b</li>\n</ul>"},
		{"list kind change", "- a\n1. b", "<ul>\n<li>a</li>\n</ul>\n<ol>\n<li>b</li>\n</ol>"},
		{"continuation", "- a\n  more", "<ul>\n<li>a<br>\nmore</li>\n</ul>"},
		{"code block", "```python\nprint('<hi>')\n```", `<pre><code class="language-python">print(&#39;&lt;hi&gt;&#39;)</code></pre>`},
		{"code block plain", "~~~\nx\n~~~", "<pre><code>x</code></pre>"},
		{"indented fence in list", "- a\n  ```\n  x\n  ```", "<ul>\n<li>a</li>\n</ul>\n<pre><code>x</code></pre>"},
		{"quote", "> a\n>\n> b", "<blockquote>\n<p>a</p>\n<p>b</p>\n</blockquote>"},
		{"rule", "a\n\n***\n\nb", "<p>a</p>\n<hr>\n<p>b</p>"},
		{"intraword underscore", "my_var_name", "<p>my_var_name</p>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := markdown.HTML(tt.md); got != tt.want {
				t.Errorf("HTML(%q)\n got: %q\nwant: %q", tt.md, got, tt.want)
			}
		})
	}
}
