// Package log is what every binary knows of the log channel type, beside
// its sender in services/messenger/logchannel: its line of pkg/channel's
// table (Spec). It has no keys of its own, and every fleet has one
// integration of it (pkg/config adds it).
package log

import "github.com/heraldhq/herald/pkg/channel/spec"

// Spec is the log channel type: a message and a line per file (name, size,
// sha256) written to the messenger's log, so any file Herald carries fits.
var Spec = spec.Channel{Type: "log", MaxFile: spec.MaxFileBytes}
