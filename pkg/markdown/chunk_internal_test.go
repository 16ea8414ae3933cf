package markdown

import "testing"

// TestVisibleMatchesTokens: the one-chunk shortcut's visible agrees with the
// token walk it stands in for, so a short message is kept or refused exactly
// as a long one would be.
func TestVisibleMatchesTokens(t *testing.T) {
	docs := []string{
		"", " ", "\n\n", "\u00a0\u2003", "**  **", "`  `", "a", " x ", "&", "<b> </b>", "> \n>",
		"[ ](https://a.b)", "🦀", "\u200b", "\xff", "***\n\n---", "- \n- ", "**bold** *it* `code` [l](https://x.y)",
	}
	for _, md := range docs {
		h := TelegramHTML(md)
		want := false
		for _, tok := range tokenize(h) {
			if tok.kind == tokText && !tok.blank() {
				want = true
			}
		}
		if got := visible(h); got != want {
			t.Errorf("visible(%q) = %v, tokens say %v", h, got, want)
		}
	}
}
