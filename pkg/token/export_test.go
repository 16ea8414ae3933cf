package token

import "time"

// SetClock makes s read the time from now.
func SetClock(s *Store, now func() time.Time) { s.now = now }

// SetVerifierClock makes v read the time from now.
func SetVerifierClock(v *Verifier, now func() time.Time) { v.now = now }
