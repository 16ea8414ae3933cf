package deliver

import (
	"cmp"
	"net/url"
	"slices"
	"strings"
)

// The shortest parts of a URL a Scrubber hides: shorter ones ("/", "v=1")
// are no secret and would blank out ordinary words, as would path segments
// shorter than minURLSegment ("hooks", "api").
const (
	minURLPart    = 4
	minURLSegment = 8
)

// Scrubber takes secrets out of texts before they are shown in an error or
// a log line: tokens, signing secrets, and the parts of a URL that may be
// tokens, each also as a URL carries it (escaped), wherever a transport
// error, a library or a provider echoing the request quotes them. A nil
// Scrubber hides nothing.
type Scrubber struct {
	mask string
	hide []string // longest first
}

// NewScrubber is a Scrubber replacing each of secrets with mask ("<token>").
func NewScrubber(mask string, secrets ...string) *Scrubber {
	s := &Scrubber{mask: mask}
	for _, secret := range secrets {
		s.add(secret, url.PathEscape(secret), url.QueryEscape(secret))
	}
	return s
}

// WithURL is a Scrubber that also hides the parts of u that may be tokens,
// for a provider whose URL is itself a credential (a webhook URL, Slack's
// and Discord's among them): u whole, its user info, its path and its
// longer path segments, its query and its query values.
func (s *Scrubber) WithURL(u *url.URL) *Scrubber {
	w := &Scrubber{mask: s.mask, hide: slices.Clone(s.hide)}
	parts := []string{u.String(), u.RawQuery, u.EscapedPath(), u.Path}
	if u.User != nil {
		parts = append(parts, u.User.String(), u.User.Username())
		if p, ok := u.User.Password(); ok {
			parts = append(parts, p)
		}
	}
	for _, seg := range strings.Split(u.Path, "/") {
		if len(seg) >= minURLSegment {
			parts = append(parts, seg)
		}
	}
	for _, vs := range u.Query() {
		for _, v := range vs {
			parts = append(parts, v, url.QueryEscape(v))
		}
	}
	for _, p := range parts {
		if len(p) >= minURLPart {
			w.add(p)
		}
	}
	return w
}

// add hides more, keeping the longest first, so that no part of a secret
// is left behind by a shorter one inside it.
func (s *Scrubber) add(secrets ...string) {
	for _, h := range secrets {
		if h != "" && !slices.Contains(s.hide, h) {
			s.hide = append(s.hide, h)
		}
	}
	slices.SortStableFunc(s.hide, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
}

// Scrub is text with every secret replaced by the mask.
func (s *Scrubber) Scrub(text string) string {
	if s == nil {
		return text
	}
	for _, h := range s.hide {
		text = strings.ReplaceAll(text, h, s.mask)
	}
	return text
}
