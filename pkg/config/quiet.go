package config

import (
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"time"
	// Time zones come with the binary: the images are built on scratch,
	// which has no /usr/share/zoneinfo for time.LoadLocation to read.
	_ "time/tzdata"
)

// QuietHours are an integration's quiet hours (architecture.md §11): notes sent
// through it while the wall clock of TZ is from From to To are held, unless
// their urgency is Pass or above, and go out as one digest per recipient
// when the hours end.
//
//	quiet_hours: { from: "22:00", to: "07:00", tz: Europe/Berlin, pass: high }
//
// From after To spans midnight. The hours follow the zone's clock across
// daylight saving changes: 22:00 to 07:00 is 9 hours most nights, 8 or 10
// on the nights the clocks change.
type QuietHours struct {
	From string `yaml:"from"`
	To   string `yaml:"to"`
	// TZ is an IANA time zone name (Europe/Berlin, UTC, Etc/GMT-2).
	TZ string `yaml:"tz"`
	// Pass is the lowest urgency that still goes through: low, normal or
	// high (unset: high, so only urgent notes pass).
	Pass string `yaml:"pass"`
}

// Urgencies in rising order, as notify.v1 names them.
const (
	UrgencyLow    = "low"
	UrgencyNormal = "normal"
	UrgencyHigh   = "high"
)

// DefaultQuietPass is quiet_hours.pass's default.
const DefaultQuietPass = UrgencyHigh

// urgencyRank orders urgencies; anything else (none given) is normal, as a
// notify's default.
func urgencyRank(u string) int {
	switch u {
	case UrgencyLow:
		return 0
	case UrgencyHigh:
		return 2
	}
	return 1
}

// PassUrgency is the lowest urgency that goes through during the hours.
func (q *QuietHours) PassUrgency() string {
	if q.Pass == "" {
		return DefaultQuietPass
	}
	return q.Pass
}

// Passes reports whether a note of urgency goes through during the hours.
func (q *QuietHours) Passes(urgency string) bool {
	return urgencyRank(urgency) >= urgencyRank(q.PassUrgency())
}

// Quiet reports whether t falls in the quiet hours and, if so, when they
// end: the first instant after t at which the zone's clock reads To. An
// unusable block (Validate refuses it) is never quiet.
func (q *QuietHours) Quiet(t time.Time) (end time.Time, quiet bool) {
	w, errs := q.check()
	if len(errs) > 0 {
		return time.Time{}, false
	}
	return w.quiet(t)
}

// Location is the hours' time zone (UTC if tz is not one).
func (q *QuietHours) Location() *time.Location {
	if loc, err := loadLocation(q.TZ); err == nil {
		return loc
	}
	return time.UTC
}

// Window is the hours as a person reads them: "22:00–07:00 Europe/Berlin".
func (q *QuietHours) Window() string { return q.From + "–" + q.To + " " + q.TZ }

// quietWindow is a checked quiet_hours block.
type quietWindow struct {
	from, to int // minutes after midnight
	loc      *time.Location
}

// clockPattern is a time of day: H:MM or HH:MM, 00:00 to 23:59.
var clockPattern = regexp.MustCompile(`^([01]?[0-9]|2[0-3]):([0-5][0-9])$`)

func parseClock(s string) (int, bool) {
	m := clockPattern.FindStringSubmatch(s)
	if m == nil {
		return 0, false
	}
	h, _ := strconv.Atoi(m[1])
	mm, _ := strconv.Atoi(m[2])
	return h*60 + mm, true
}

// locations are the time zones loaded so far: a zone is read and parsed
// once, not at every note.
var locations sync.Map // name -> *time.Location

func loadLocation(name string) (*time.Location, error) {
	if l, ok := locations.Load(name); ok {
		return l.(*time.Location), nil
	}
	l, err := time.LoadLocation(name)
	if err != nil {
		return nil, err
	}
	locations.Store(name, l)
	return l, nil
}

// quietProblem is one problem of a block: the key at fault and what is wrong.
type quietProblem struct{ key, msg string }

// check compiles the block, or says what is wrong with it, key by key.
func (q *QuietHours) check() (*quietWindow, []quietProblem) {
	var errs []quietProblem
	w := &quietWindow{}
	clock := func(key, v string, to *int) {
		var ok bool
		switch *to, ok = parseClock(v); {
		case v == "":
			errs = append(errs, quietProblem{key, key + " is required: a time of day like 22:00"})
		case !ok:
			errs = append(errs, quietProblem{key, fmt.Sprintf("%s %q is not a time of day: write HH:MM, from 00:00 to 23:59, like 22:00", key, v)})
		}
	}
	clock("from", q.From, &w.from)
	clock("to", q.To, &w.to)
	if q.From != "" && q.From == q.To {
		errs = append(errs, quietProblem{"to", fmt.Sprintf("to %s is from too: the hours would hold nothing; leave quiet_hours out for none", q.To)})
	}
	switch loc, err := loadLocation(q.TZ); {
	case q.TZ == "":
		errs = append(errs, quietProblem{"tz", "tz is required: the time zone the hours are in, an IANA name like Europe/Berlin or UTC"})
	case err != nil || q.TZ == "Local":
		// Local is whatever zone the process happens to run in: another
		// on every machine, UTC in a container.
		errs = append(errs, quietProblem{"tz", fmt.Sprintf("tz %q is not a time zone: name one as the IANA database does, like Europe/Berlin, America/New_York, UTC or Etc/GMT-2", q.TZ)})
	default:
		w.loc = loc
	}
	switch q.Pass {
	case "", UrgencyLow, UrgencyNormal, UrgencyHigh:
	default:
		errs = append(errs, quietProblem{"pass", fmt.Sprintf("pass %q must be low, normal or high: the lowest urgency that still goes through (default high)", q.Pass)})
	}
	return w, errs
}

// checkQuietHours is Validate's step for the integrations' quiet hours.
func (c *Config) checkQuietHours(add func(format string, a ...any)) {
	for i, in := range c.Integrations {
		if in.QuietHours == nil {
			continue
		}
		_, errs := in.QuietHours.check()
		for _, e := range errs {
			add("integrations[%d].quiet_hours.%s", i, e.msg)
		}
	}
}

// quiet reports whether t is in one of the windows, each from the first
// instant of a day at which the clock reads from to the first after it at
// which it reads to, and when that window ends.
func (w *quietWindow) quiet(t time.Time) (time.Time, bool) {
	y, m, d := t.In(w.loc).Date()
	// A window that spans midnight may have begun the day before.
	for back := -1; back <= 0; back++ {
		start := reach(y, m, d+back, w.from, w.loc)
		endDay := d + back
		if w.to <= w.from {
			endDay++
		}
		end := reach(y, m, endDay, w.to, w.loc)
		if !t.Before(start) && t.Before(end) {
			return end, true
		}
	}
	return time.Time{}, false
}

// reach is the first instant of the day (y, m, d) (d may overflow the
// month) at which loc's clock reads minute of day, or passes it: where the
// clocks jump over it (daylight saving begins), the jump; where they are
// put back over it, its first occurrence.
func reach(y int, m time.Month, d, minute int, loc *time.Location) time.Time {
	// The day itself, normalized (d+1 at a month's end), taken at noon,
	// which no zone skips.
	y, m, d = time.Date(y, m, d, 12, 0, 0, 0, loc).Date()
	t := time.Date(y, m, d, minute/60, minute%60, 0, 0, loc)
	ty, tm, td := t.Date()
	if ty != y || tm != m || td != d || t.Hour()*60+t.Minute() != minute {
		// The clock never reads minute that day: time.Date gave a time
		// beside the gap. The gap is one zone's end and the next's start.
		start, end := t.ZoneBounds()
		if wallBefore(ty, tm, td, t.Hour()*60+t.Minute(), y, m, d, minute) {
			return end
		}
		return start
	}
	// The clock may read minute twice (put back an hour at 03:00, it reads
	// 02:30 in summer time, then in winter time); time.Date may give either.
	start, _ := t.ZoneBounds()
	if !start.IsZero() {
		_, prevOff := start.Add(-time.Nanosecond).Zone()
		_, off := t.Zone()
		if prevOff > off {
			if first := t.Add(-time.Duration(prevOff-off) * time.Second); first.Before(start) {
				return first
			}
		}
	}
	return t
}

// wallBefore reports whether the wall clock (ay, am, ad, aMin) is earlier than
// (by, bm, bd, bMin).
func wallBefore(ay int, am time.Month, ad, aMin, by int, bm time.Month, bd, bMin int) bool {
	a := time.Date(ay, am, ad, 0, aMin, 0, 0, time.UTC)
	b := time.Date(by, bm, bd, 0, bMin, 0, 0, time.UTC)
	return a.Before(b)
}
