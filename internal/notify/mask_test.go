package notify

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTruncateKeepsUTF8(t *testing.T) {
	t.Parallel()
	s := strings.Repeat("é", 600) // 1200 bytes
	if got := Truncate(s, 1000); len(got) != 1000 || !utf8.ValidString(got) {
		t.Errorf("Truncate to 1000 bytes gave %d bytes, valid %v", len(got), utf8.ValidString(got))
	}
	if got := Truncate("abc€", 5); got != "abc" {
		t.Errorf("Truncate(abc€, 5) = %q, want abc", got)
	}
}
