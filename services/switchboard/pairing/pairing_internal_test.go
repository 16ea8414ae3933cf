package pairing

import (
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/bus/bustest"
)

// openTestPairing is the pairing registry on a fresh NATS server, on a
// clock the test sets.
func openTestPairing(t *testing.T) (*Store, *time.Time) {
	t.Helper()
	_, js := bustest.RunServer(t).Connect()
	p, err := Open(t.Context(), js)
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	p.now = func() time.Time { return clock }
	return p, &clock
}

// TestStrangersCannotLockPairing: k strangers who ask for codes as soon as
// they can, every minute for two hours, keep a newcomer from a code for at
// most ceil(k/3) × 10 minutes, and never hold more than one code each.
func TestStrangersCannotLockPairing(t *testing.T) {
	for _, k := range []int{1, 3, 6, 9, 15} {
		t.Run(fmt.Sprintf("%d strangers", k), func(t *testing.T) {
			p, clock := openTestPairing(t)
			start := *clock
			limit := time.Duration((k+2)/3) * 10 * time.Minute
			var waited time.Duration
			got := false
			for minute := range 120 {
				*clock = start.Add(time.Duration(minute) * time.Minute)
				for i := range k {
					sender := "9" + strconv.Itoa(i)
					_, err := p.Request(t.Context(), "tg_main", sender, "", sender, fmt.Sprintf("%s:%d", sender, minute))
					if err != nil && !errors.Is(err, ErrFull) && !errors.Is(err, ErrPending) {
						t.Fatal(err)
					}
				}
				if !got {
					_, err := p.Request(t.Context(), "tg_main", "newcomer", "", "newcomer", strconv.Itoa(minute))
					switch {
					case err == nil:
						got, waited = true, clock.Sub(start)
					case !errors.Is(err, ErrFull):
						t.Fatalf("the newcomer at minute %d: %v", minute, err)
					}
				}
				pending, err := p.Pending(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				if len(pending) > 18 {
					t.Fatalf("%d codes pending at minute %d, want at most 18", len(pending), minute)
				}
				held := map[string]int{}
				for _, c := range pending {
					if held[c.Sender]++; held[c.Sender] > 1 {
						t.Fatalf("%s holds %d codes at minute %d", c.Sender, held[c.Sender], minute)
					}
				}
			}
			if !got || waited > limit {
				t.Errorf("the newcomer got a code: %v, after %v; want within %v", got, waited, limit)
			}
		})
	}
}

// TestPairingWindowKeepsCodes: a code's place frees after ten minutes, but
// the code can be approved for its whole hour, and its stranger gets no
// other until it expires.
func TestPairingWindowKeepsCodes(t *testing.T) {
	p, clock := openTestPairing(t)
	start := *clock
	var codes []*Code
	for _, s := range []string{"901", "902", "903"} {
		c, err := p.Request(t.Context(), "tg_main", s, "", s, "m"+s)
		if err != nil {
			t.Fatal(err)
		}
		codes = append(codes, c)
	}
	if _, err := p.Request(t.Context(), "tg_main", "904", "", "904", "m904"); !errors.Is(err, ErrFull) {
		t.Fatalf("a fourth code at once: %v, want ErrFull", err)
	}
	if _, err := p.Request(t.Context(), "tg_other", "904", "", "904", "o904"); err != nil {
		t.Fatalf("another integration's places were taken: %v", err)
	}

	*clock = start.Add(10 * time.Minute)
	if _, err := p.Request(t.Context(), "tg_main", "904", "", "904", "n904"); err != nil {
		t.Fatalf("ten minutes later: %v", err)
	}
	if _, err := p.Request(t.Context(), "tg_main", "901", "", "901", "n901"); !errors.Is(err, ErrPending) {
		t.Fatalf("901 asked again while holding a code: %v, want ErrPending", err)
	}

	*clock = start.Add(59 * time.Minute)
	ps, err := p.Approve(t.Context(), codes[0].Code)
	if err != nil || ps.Sender != "901" {
		t.Fatalf("approving the first code in its hour: %+v, %v", ps, err)
	}
	if paired, err := p.IsPaired(t.Context(), "tg_main", "901"); err != nil || !paired {
		t.Fatalf("901 paired: %v, %v", paired, err)
	}

	*clock = start.Add(61 * time.Minute)
	if _, err := p.Approve(t.Context(), codes[1].Code); !errors.Is(err, ErrCodeExpired) {
		t.Errorf("approving a code after its hour: %v, want ErrCodeExpired", err)
	}
	if _, err := p.Request(t.Context(), "tg_main", "903", "", "903", "n903"); err != nil {
		t.Errorf("903 asked again after the code expired: %v", err)
	}
}

// TestPairingKeepsTheName: the name the channel gave the stranger stays
// with their code and their pairing, for herald pair list; a pairing kept
// before names were (no "name" in its record) still loads, nameless.
func TestPairingKeepsTheName(t *testing.T) {
	p, _ := openTestPairing(t)
	c, err := p.Request(t.Context(), "tg_main", "4242", "ada_l", "4242", "m1")
	if err != nil {
		t.Fatal(err)
	}
	pending, err := p.Pending(t.Context())
	if err != nil || len(pending) != 1 || pending[0].Name != "ada_l" {
		t.Fatalf("pending: %+v, %v; want ada_l's code", pending, err)
	}
	// A redelivery of the same message gets the same code, name and all.
	again, err := p.Request(t.Context(), "tg_main", "4242", "ada_l", "4242", "m1")
	if err != nil || again.Code != c.Code || again.Name != "ada_l" {
		t.Fatalf("the same message again: %+v, %v", again, err)
	}
	ps, err := p.Approve(t.Context(), c.Code)
	if err != nil || ps.Name != "ada_l" {
		t.Fatalf("approved: %+v, %v; want the name kept", ps, err)
	}
	old := `{"integration":"tg_main","sender":"77","chat_id":"77","code":"ABCDEF","paired":"2024-06-01T10:00:00Z"}`
	if _, err := p.kv.Put(t.Context(), pairedKey("tg_main", "77"), []byte(old)); err != nil {
		t.Fatal(err)
	}
	paired, err := p.Paired(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range paired {
		names = append(names, s.Sender+"="+s.Name)
	}
	if got, want := fmt.Sprint(names), "[4242=ada_l 77=]"; got != want {
		t.Errorf("paired senders %s, want %s", got, want)
	}
}
