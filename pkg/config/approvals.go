package config

import "time"

// Approvals is how long permission prompts stay open (design §11):
// top-level `approvals: { expire_after: 10m, grant_ttl: 8h }`.
type Approvals struct {
	// ExpireAfter is how long a prompt can be answered; unset is
	// DefaultExpireAfter, 0 is never.
	ExpireAfter *Duration `yaml:"expire_after"`
	// GrantTTL bounds an "Allow for this session" grant; unset is
	// DefaultGrantTTL.
	GrantTTL Duration `yaml:"grant_ttl"`
}

// Defaults of approvals.
const (
	DefaultExpireAfter = 10 * time.Minute
	DefaultGrantTTL    = 8 * time.Hour
)

// Expiry is how long a prompt can be answered; 0 is for ever.
func (a Approvals) Expiry() time.Duration {
	if a.ExpireAfter == nil {
		return DefaultExpireAfter
	}
	return time.Duration(*a.ExpireAfter)
}

// validate adds the problems of approvals.
func (a Approvals) validate(add func(format string, args ...any)) {
	if a.ExpireAfter != nil && *a.ExpireAfter < 0 {
		add("approvals.expire_after must be 0 (never) or a duration like 10m, not %s", time.Duration(*a.ExpireAfter))
	}
	if a.GrantTTL < 0 {
		add("approvals.grant_ttl must be a duration like 8h, not %s", time.Duration(a.GrantTTL))
	}
}
