package config

import (
	"path/filepath"

	"github.com/heraldhq/herald/pkg/channel/spec"
)

// Files is a butler's files setting: where the files it sends may come
// from, how big one may be, and where the attachments it downloads go.
type Files struct {
	// Roots are the directories whose files the butler may send (symlinks
	// resolved); default: its working directory.
	Roots []string `yaml:"roots"`
	// MaxBytes bounds one file, sent or downloaded (default 50 MB).
	MaxBytes int64 `yaml:"max_bytes"`
	// Inbox is where download_attachment saves (default
	// .herald/files/<butler>/ of its working directory).
	Inbox string `yaml:"inbox"`
}

// DefaultFileMaxBytes is files.max_bytes left out; MaxFileBytes is the
// most it may be (spec.MaxFileBytes).
const (
	DefaultFileMaxBytes = 50 << 20
	MaxFileBytes        = spec.MaxFileBytes
)

// FileMaxBytes is the largest file the butler sends or downloads.
func (b *Butler) FileMaxBytes() int64 {
	if b == nil || b.Files.MaxBytes <= 0 {
		return DefaultFileMaxBytes
	}
	return b.Files.MaxBytes
}

// FileRoots are the directories the butler may send files from, resolved
// against dir (its working directory).
func (b *Butler) FileRoots(dir string) []string {
	if b == nil || len(b.Files.Roots) == 0 {
		return []string{dir}
	}
	out := make([]string, len(b.Files.Roots))
	for i, r := range b.Files.Roots {
		out[i] = AbsIn(dir, r)
	}
	return out
}

// FileInbox is where the butler saves what it downloads, resolved against
// dir.
func (b *Butler) FileInbox(dir string) string {
	if b == nil || b.Files.Inbox == "" {
		name := ""
		if b != nil {
			name = b.Name
		}
		return filepath.Join(dir, ".herald", "files", name)
	}
	return AbsIn(dir, b.Files.Inbox)
}

// AbsIn is p, relative to dir unless it is absolute.
func AbsIn(dir, p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(dir, p)
}

// checkFiles is checkButlers' step for b.files.
func checkFiles(at string, b *Butler, add func(format string, a ...any)) {
	if f := b.Files.MaxBytes; f < 0 || f > MaxFileBytes {
		add("%s.files.max_bytes must be a number of bytes from 1 to %d (1 GiB), not %d; leave it out for 50 MB", at, int64(MaxFileBytes), f)
	}
	for j, r := range b.Files.Roots {
		if r == "" {
			add("%s.files.roots[%d] is empty; name a directory whose files the butler may send", at, j)
		}
	}
}

// Bounds of nats.files_max_bytes: the store must hold the largest file a
// butler may send, and a few at once.
const (
	MinFilesStoreBytes = 64 << 20
	MaxFilesStoreBytes = 1 << 40
)

// checkFilesStore is check's step for nats.files_max_bytes.
func (c *Config) checkFilesStore(add func(format string, a ...any)) {
	n := c.NATS.FilesMaxBytes
	if n == 0 {
		return
	}
	if n < MinFilesStoreBytes || n > MaxFilesStoreBytes {
		add("nats.files_max_bytes must be a number of bytes from %d (64 MiB) to %d (1 TiB), not %d; leave it out for 2 GiB", int64(MinFilesStoreBytes), int64(MaxFilesStoreBytes), n)
		return
	}
	for i := range c.Butlers {
		if b := &c.Butlers[i]; b.FileMaxBytes() > n {
			add("nats.files_max_bytes (%d) is less than butlers[%d].files.max_bytes (%d): no file of that size would ever fit; raise it or lower the butler's", n, i, b.FileMaxBytes())
		}
	}
}
