package bus

import (
	"crypto/sha256"
	"encoding/base32"
)

// KeyToken turns an outside id (a Telegram user id, an email address, a
// Message-ID, "web:<visitor>") into one token of a KV key. Ids made only of
// letters, digits, '-' and '_' stay as they are, so keys remain readable;
// anything else is "=" and its base32, and a very long id "==" and the base32
// of its SHA-256. '=' never occurs in a kept id or in unpadded base32, so two
// different ids never share a token.
func KeyToken(id string) string {
	const maxKept, maxEncoded = 128, 256
	if len(id) > 0 && len(id) <= maxKept && plainToken(id) {
		return id
	}
	if len(id) <= maxEncoded {
		return "=" + b32.EncodeToString([]byte(id))
	}
	sum := sha256.Sum256([]byte(id))
	return "==" + b32.EncodeToString(sum[:])
}

var b32 = base32.StdEncoding.WithPadding(base32.NoPadding)

func plainToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
