package lease

// SkipRelease makes l behave like a process that dies while holding the
// lease: when Run stops, the key is left for the others to find expired.
func SkipRelease(l *Lease) { l.noRelease = true }
