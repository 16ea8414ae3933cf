package config

import (
	"regexp"
	"strings"
	"time"

	"github.com/heraldhq/herald/pkg/envelope"
)

// Approvals is how long permission prompts stay open (architecture.md §11):
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

// Quorum is one rule of a butler's quorum: a prompt for a tool whose name
// matches Tools (a regular expression; ^…$ to match it whole) is allowed
// only once Count distinct approvers allowed it; one deny ends it.
type Quorum struct {
	Tools string `yaml:"tools"`
	Count int    `yaml:"count"`
}

// MaxQuorum bounds a quorum's count.
const MaxQuorum = 10

// QuorumFor is how many distinct approvers must allow tool: the count of
// the first rule that matches, else 1.
func (b *Butler) QuorumFor(tool string) int {
	for _, q := range b.Quorum {
		if re, err := regexp.Compile(q.Tools); err == nil && re.MatchString(tool) {
			return q.Count
		}
	}
	return 1
}

// MayApprove reports whether the person known on integration by any of ids
// (the sender identity, the user id) may answer b's prompts there: an
// approver of the integration, and, if b lists approvers, one of them.
func (b *Butler) MayApprove(in *Integration, ids ...string) bool {
	if !anyOf(in.Inbound.Approvers, ids) {
		return false
	}
	if len(b.Approvers) == 0 {
		return true
	}
	for _, a := range b.Approvers {
		id, sender, _ := strings.Cut(a, ":")
		if id == in.ID && anyOf([]string{sender}, ids) {
			return true
		}
	}
	return false
}

// anyOf reports whether any of ids is in list (ASCII case folded, as
// allow_from and approvers are matched).
func anyOf(list, ids []string) bool {
	for _, l := range list {
		for _, id := range ids {
			if l != "" && strings.EqualFold(envelope.WebVisitor(l), envelope.WebVisitor(id)) {
				return true
			}
		}
	}
	return false
}

// Approver is one person who may answer a butler's prompts: an approver
// (Who) of an integration that receives and is granted to it.
type Approver struct {
	Integration *Integration
	Who         string
}

// ApproversOf are the people who may answer b's prompts, where each is
// asked.
func (c *Config) ApproversOf(b *Butler) []Approver {
	var out []Approver
	for i := range c.Integrations {
		in := &c.Integrations[i]
		if in.Disabled || !in.Inbound.Enabled || !in.Grants.Allows(b.Name) {
			continue
		}
		for _, a := range in.Inbound.Approvers {
			if b.MayApprove(in, a) {
				out = append(out, Approver{Integration: in, Who: a})
			}
		}
	}
	return out
}

// checkApprovers checks a butler's approvers and quorum.
func (c *Config) checkApprovers(at string, b *Butler, add func(format string, a ...any)) {
	for j, a := range b.Approvers {
		id, sender, ok := strings.Cut(a, ":")
		in := c.Integration(id)
		switch {
		case !ok || id == "" || sender == "":
			add("%s.approvers[%d] %q must be <integration>:<sender>, like tg_main:12345", at, j, a)
		case in == nil:
			add("%s.approvers[%d]: integration %q is not configured", at, j, id)
		case !in.Grants.Allows(b.Name):
			add("%s.approvers[%d]: integration %q is not granted to butler %q, so its approvers are never asked", at, j, id, b.Name)
		case !anyOf(in.Inbound.Approvers, []string{sender}):
			add("%s.approvers[%d]: %s is not an approver of integration %s; add it to that integration's inbound.approvers first", at, j, sender, id)
		}
	}
	people := len(c.ApproversOf(b))
	for j, q := range b.Quorum {
		if _, err := regexp.Compile(q.Tools); err != nil || q.Tools == "" {
			add("%s.quorum[%d].tools %q must be a regular expression on the tool's name, like ^(Bash|Write)$", at, j, q.Tools)
		}
		switch {
		case q.Count < 1 || q.Count > MaxQuorum:
			add("%s.quorum[%d].count must be 1 to %d approvers, not %d", at, j, MaxQuorum, q.Count)
		case q.Count > people:
			add("%s.quorum[%d].count %d can never be reached: only %d approver(s) may answer butler %q", at, j, q.Count, people, b.Name)
		}
	}
}
