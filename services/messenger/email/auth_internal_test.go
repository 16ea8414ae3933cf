package email

import "testing"

func TestDKIMFromFields(t *testing.T) {
	tests := []struct {
		name string
		raw  string
		want int
	}{
		{"one From", "From: ann@example.org\r\nTo: herald@example.com\r\n\r\nhi\r\n", 1},
		{"any case, bare LF", "fROM: ann@example.org\n\nhi\n", 1},
		{"space before the colon", "From: ann@example.org\r\nFrom : boss@example.org\r\n\r\n", 2},
		{"a folded line is not a field", "Subject: a\r\n From: boss@example.org\r\nFrom: ann@example.org\r\n\r\n", 1},
		{"the body is not the header", "From: ann@example.org\r\n\r\nFrom: boss@example.org\r\n", 1},
		{"no From", "To: herald@example.com\r\n\r\n", 0},
		{"From-like names", "From-X: a\r\nFromage: b\r\nReply-From: c\r\n\r\n", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := dkimFromFields([]byte(tt.raw)); got != tt.want {
				t.Errorf("dkimFromFields = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestAligned(t *testing.T) {
	tests := []struct {
		from, d string
		want    bool
	}{
		{"example.org", "example.org", true},
		{"mail.example.org", "example.org", true},
		{"a.b.example.org", "example.org", true},
		{"example.org", "mail.example.org", false}, // a subdomain does not speak for its parent
		{"example.org", "ample.org", false},
		{"badexample.org", "example.org", false},
		{"example.org", "org", false}, // a top-level domain never counts
		{"example.org", "", false},
	}
	for _, tt := range tests {
		if got := aligned(tt.from, tt.d); got != tt.want {
			t.Errorf("aligned(%q, %q) = %v, want %v", tt.from, tt.d, got, tt.want)
		}
	}
}
