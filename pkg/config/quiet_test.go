package config_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/config"
)

// at is the instant the clock of zone reads s ("2006-01-02 15:04", with an
// offset "-0700" where the clock reads it twice).
func at(t *testing.T, zone, s string) time.Time {
	t.Helper()
	loc, err := time.LoadLocation(zone)
	if err != nil {
		t.Fatal(err)
	}
	layout := "2006-01-02 15:04"
	if len(s) > len(layout) {
		layout += " -0700"
	}
	v, err := time.ParseInLocation(layout, s, loc)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestQuietHoursWindow: a time is held when the zone's wall clock is in
// the window, until the first instant the clock reads to; windows span
// midnight when from is after to, and follow the clock across daylight
// saving changes, including hours the change skips or repeats.
func TestQuietHoursWindow(t *testing.T) {
	const berlin = "Europe/Berlin"
	for _, tt := range []struct {
		name, from, to, zone string
		now                  string // in zone
		quiet                bool
		until                string // in zone; "" when not quiet
		hours                float64
	}{
		{"late evening, over midnight", "22:00", "07:00", berlin, "2026-11-26 23:00", true, "2026-11-27 07:00", 8},
		{"after midnight", "22:00", "07:00", berlin, "2026-11-27 03:15", true, "2026-11-27 07:00", 3.75},
		{"at from", "22:00", "07:00", berlin, "2026-11-26 22:00", true, "2026-11-27 07:00", 9},
		{"at to: over", "22:00", "07:00", berlin, "2026-11-27 07:00", false, "", 0},
		{"a minute before from", "22:00", "07:00", berlin, "2026-11-26 21:59", false, "", 0},
		{"midday", "22:00", "07:00", berlin, "2026-11-26 12:00", false, "", 0},
		{"across a new year", "22:00", "07:00", berlin, "2026-12-31 23:30", true, "2027-01-01 07:00", 7.5},
		{"same day window", "09:00", "17:00", berlin, "2026-11-26 12:00", true, "2026-11-26 17:00", 5},
		{"same day window, before", "09:00", "17:00", berlin, "2026-11-26 08:59", false, "", 0},
		{"same day window, evening", "09:00", "17:00", berlin, "2026-11-26 17:30", false, "", 0},
		// Summer time begins at 02:00 on 2026-03-29 (to 03:00): the night
		// is an hour shorter, 22:00 to 07:00 is 8 hours.
		{"spring night is shorter", "22:00", "07:00", berlin, "2026-03-28 22:00", true, "2026-03-29 07:00", 8},
		// Winter time begins at 03:00 on 2026-10-25 (back to 02:00): 10 hours.
		{"autumn night is longer", "22:00", "07:00", berlin, "2026-10-24 22:00", true, "2026-10-25 07:00", 10},
		// to in the skipped hour: the hours end when the clock jumps over it.
		{"to skipped by the clocks", "22:00", "02:30", berlin, "2026-03-29 01:59", true, "2026-03-29 03:00 +0200", 1.0 / 60},
		// from in the skipped hour: they begin at the jump.
		{"from skipped by the clocks", "02:30", "06:00", berlin, "2026-03-29 03:00", true, "2026-03-29 06:00", 3},
		{"before a skipped from", "02:30", "06:00", berlin, "2026-03-29 01:59", false, "", 0},
		// to in the repeated hour: the hours end at its first 02:30
		// (summer time), and the repeated half hour is not quiet again.
		{"to repeated by the clocks", "22:00", "02:30", berlin, "2026-10-25 02:10 +0200", true, "2026-10-25 02:30 +0200", 1.0 / 3},
		{"the repeat of a to is not quiet", "22:00", "02:30", berlin, "2026-10-25 02:10 +0100", false, "", 0},
		// A zone whose clocks skip midnight itself (Chile, 2026-09-06 00:00
		// to 01:00): the hours begin at 01:00.
		{"midnight skipped", "00:00", "06:00", "America/Santiago", "2026-09-06 01:00", true, "2026-09-06 06:00", 5},
		{"fixed offset zone", "23:00", "00:05", "Etc/GMT-3", "2026-11-26 23:59", true, "2026-11-27 00:05", 6.0 / 60},
	} {
		t.Run(tt.name, func(t *testing.T) {
			q := &config.QuietHours{From: tt.from, To: tt.to, TZ: tt.zone}
			now := at(t, tt.zone, tt.now)
			until, quiet := q.Quiet(now)
			if quiet != tt.quiet {
				t.Fatalf("quiet at %s = %v, want %v", now, quiet, tt.quiet)
			}
			if !quiet {
				return
			}
			if want := at(t, tt.zone, tt.until); !until.Equal(want) {
				t.Errorf("until %s, want %s", until, want)
			}
			if got := until.Sub(now).Hours(); got < tt.hours-1e-9 || got > tt.hours+1e-9 {
				t.Errorf("held for %.4f h, want %.4f", got, tt.hours)
			}
		})
	}
}

// TestQuietHoursPass: pass is the lowest urgency that goes through; by
// default only high does.
func TestQuietHoursPass(t *testing.T) {
	for _, tt := range []struct {
		pass   string
		passes map[string]bool
	}{
		{"", map[string]bool{"low": false, "normal": false, "": false, "high": true}},
		{"high", map[string]bool{"low": false, "normal": false, "high": true}},
		{"normal", map[string]bool{"low": false, "normal": true, "": true, "high": true}},
		{"low", map[string]bool{"low": true, "normal": true, "high": true}},
	} {
		q := &config.QuietHours{From: "22:00", To: "07:00", TZ: "UTC", Pass: tt.pass}
		for u, want := range tt.passes {
			if got := q.Passes(u); got != want {
				t.Errorf("pass %q: urgency %q passes = %v, want %v", tt.pass, u, got, want)
			}
		}
	}
}

// TestQuietHoursErrors: what cannot be a window is refused at load, naming
// the line and the key.
func TestQuietHoursErrors(t *testing.T) {
	const head = "integrations:\n- id: l\n  type: log\n  quiet_hours:\n"
	for _, tt := range []struct{ name, block, want string }{
		{"an hour past 23", `    from: "25:00"` + "\n" + `    to: "07:00"` + "\n    tz: UTC\n",
			`line 5: integrations[0].quiet_hours.from "25:00" is not a time of day`},
		{"an hour without minutes", `    from: "22:00"` + "\n    to: 7\n    tz: UTC\n",
			`line 6: integrations[0].quiet_hours.to "7" is not a time of day`},
		{"an unknown zone", `    from: "22:00"` + "\n" + `    to: "07:00"` + "\n    tz: Europe/Atlantis\n",
			`line 7: integrations[0].quiet_hours.tz "Europe/Atlantis" is not a time zone`},
		{"the process's zone", `    from: "22:00"` + "\n" + `    to: "07:00"` + "\n    tz: Local\n",
			`line 7: integrations[0].quiet_hours.tz "Local" is not a time zone`},
		{"no zone", `    from: "22:00"` + "\n" + `    to: "07:00"` + "\n",
			`line 4: integrations[0].quiet_hours.tz is required`},
		{"no to", `    from: "22:00"` + "\n    tz: UTC\n",
			`line 4: integrations[0].quiet_hours.to is required`},
		{"an empty window", `    from: "07:00"` + "\n" + `    to: "07:00"` + "\n    tz: UTC\n",
			`line 6: integrations[0].quiet_hours.to 07:00 is from too`},
		{"a pass that is no urgency", `    from: "22:00"` + "\n" + `    to: "07:00"` + "\n    tz: UTC\n    pass: urgent\n",
			`line 8: integrations[0].quiet_hours.pass "urgent" must be low, normal or high`},
		{"a misspelt key", `    from: "22:00"` + "\n" + `    to: "07:00"` + "\n    timezone: UTC\n",
			`line 7: integrations[0].quiet_hours.timezone is not a setting`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.Parse([]byte(head + tt.block))
			if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("%v\nwant ErrInvalid with %q", err, tt.want)
			}
		})
	}

	// Every problem at once.
	_, err := config.Parse([]byte(head + "    from: \"24:00\"\n    to: \"7.00\"\n    tz: Mars/Olympus\n    pass: loud\n"))
	for _, want := range []string{"quiet_hours.from", "quiet_hours.to", "quiet_hours.tz", "quiet_hours.pass"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v\nwant it to name %s too", err, want)
		}
	}

	c, err := config.Parse([]byte(head + `    { from: "22:00", to: "07:00", tz: Europe/Berlin }` + "\n  grants: all\n"))
	if err != nil {
		t.Fatal(err)
	}
	if q := c.Integration("l").QuietHours; q == nil || q.PassUrgency() != "high" || q.Window() != "22:00–07:00 Europe/Berlin" {
		t.Fatalf("quiet_hours %+v: want the block, pass high by default", q)
	}
}
