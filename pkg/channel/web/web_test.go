package web_test

import (
	"strings"
	"testing"

	"github.com/heraldhq/herald/pkg/channel/spec"
	"github.com/heraldhq/herald/pkg/channel/web"
)

func TestCheck(t *testing.T) {
	s := web.Spec.Settings().(*web.Settings)
	if s.Listen != web.DefaultListen {
		t.Errorf("listen by default: %q", s.Listen)
	}
	if got := s.Check(spec.Integration{ID: "web_2"}); got != nil {
		t.Errorf("the defaults: %q", got)
	}
	got := (&web.Settings{Listen: "8787"}).Check(spec.Integration{ID: "my chat"})
	if len(got) != 2 || !strings.Contains(got[0], "a web integration's id becomes part of its page's paths") || !strings.HasPrefix(got[1], `listen "8787" is not host:port`) {
		t.Errorf("a bad id and listen: %q", got)
	}
}
