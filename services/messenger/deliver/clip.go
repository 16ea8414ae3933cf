package deliver

import "unicode/utf8"

// MaxMeta is how long one meta value of a received message may be, in
// bytes; longer ones are cut (ClipMeta).
const MaxMeta = 4096

// Clip cuts text to at most n bytes, at a character boundary.
func Clip(text string, n int) string {
	if len(text) <= n {
		return text
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(text[cut]) {
		cut--
	}
	return text[:cut]
}

// ClipMeta cuts each value of meta to MaxMeta bytes, in place, and returns
// meta.
func ClipMeta(meta map[string]string) map[string]string {
	for k, v := range meta {
		meta[k] = Clip(v, MaxMeta)
	}
	return meta
}
