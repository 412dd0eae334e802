package notify

import (
	"regexp"
	"strings"
	"testing"
)

// isKey accepts what the regular expression ^[\x21-\x7e]+$ it replaced accepted.
func TestIsKeyIsPrintableASCII(t *testing.T) {
	re := regexp.MustCompile(`^[\x21-\x7e]+$`)
	for _, s := range []string{"", "a", "order-1001", "fcm-token:ABC_def/123", "with space", "tab\t", "é", "\x7f", "~!", "\x20", "\x21", "ü-1", strings.Repeat("x", 5000)} {
		if got, want := isKey(s), re.MatchString(s); got != want {
			t.Errorf("isKey(%q) = %v, want %v", s, got, want)
		}
	}
	for b := range 256 {
		s := string([]byte{'a', byte(b)})
		if got, want := isKey(s), re.MatchString(s); got != want {
			t.Errorf("isKey(%q) = %v, want %v", s, got, want)
		}
	}
}
