package alimtalk

import (
	"strings"
	"testing"

	"herald/internal/notify"
)

func TestNormalizePhone(t *testing.T) {
	t.Parallel()
	ok := []struct{ in, want string }{
		{"010-1234-5678", "01012345678"},
		{"+82 10 1234 5678", "01012345678"},
		{"+821012345678", "01012345678"},
		{"01012345678", "01012345678"},
		{" 010 1234 5678 ", "01012345678"},
		{"010.1234.5678", "01012345678"},
		{"+82 (0)10-1234-5678", "01012345678"},
		{"+82-010-1234-5678", "01012345678"},
		{"008210-1234-5678", "01012345678"},
		{"011-123-4567", "0111234567"},
		{"016-1234-5678", "01612345678"},
		{"+82 19 123 4567", "0191234567"},
	}
	for _, tt := range ok {
		got, err := NormalizePhone(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("NormalizePhone(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	refused := []struct{ name, in string }{
		{"empty", ""},
		{"US number", "+1 415 555 0100"},
		{"Japanese mobile", "+81 90 1234 5678"},
		{"Seoul landline", "02-1234-5678"},
		{"landline in E.164", "+82 2 1234 5678"},
		{"regional landline", "031-123-4567"},
		{"050 safe number", "0505-123-4567"},
		{"internet phone", "070-1234-5678"},
		{"toll free", "080-123-4567"},
		{"too short", "010-123-456"},
		{"too long", "010-1234-56789"},
		{"010 with 7 digits", "010-123-4567"},
		{"unissued 0100", "010-0123-4567"},
		{"012 prefix", "012-345-6789"},
		{"letters", "010-CALL-ME"},
		{"plus inside", "010+1234+5678"},
		{"national without 0", "1012345678"},
	}
	for _, tt := range refused {
		got, err := NormalizePhone(tt.in)
		if err == nil {
			t.Errorf("%s: NormalizePhone(%q) = %q, want a refusal", tt.name, tt.in, got)
			continue
		}
		if !notify.IsCode(err, notify.EINVALID) || !strings.HasPrefix(notify.ErrorMessage(err), notify.ReasonUnsupportedAddress+": ") {
			t.Errorf("%s: %v, want %s with reason %s", tt.name, err, notify.EINVALID, notify.ReasonUnsupportedAddress)
		}
		if digits := strings.Map(keepDigits, tt.in); len(digits) > 4 && strings.Contains(err.Error(), digits) {
			t.Errorf("%s: the error shows the number: %v", tt.name, err)
		}
	}
}

func keepDigits(r rune) rune {
	if r >= '0' && r <= '9' {
		return r
	}
	return -1
}

func TestSMSKind(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		text string
		want string
		len  int
	}{
		{"empty", "", KindSMS, 0},
		{"90 ASCII", strings.Repeat("a", 90), KindSMS, 90},
		{"91 ASCII", strings.Repeat("a", 91), KindLMS, 91},
		{"45 Hangul", strings.Repeat("가", 45), KindSMS, 90},
		{"46 Hangul", strings.Repeat("가", 46), KindLMS, 92},
		{"44 Hangul and 2 ASCII", strings.Repeat("한", 44) + "ab", KindSMS, 90},
		{"44 Hangul and 3 ASCII", strings.Repeat("한", 44) + "abc", KindLMS, 91},
		{"emoji counts two", strings.Repeat("😀", 46), KindLMS, 92},
		{"2000 bytes", strings.Repeat("가", 1000), KindLMS, 2000},
		{"over an LMS", strings.Repeat("가", 1000) + "a", "", 2001},
		{"newlines are bytes", "[Herald]\n주문하신 상품이 발송되었습니다.", KindSMS, 9 + 2*14 + 3},
	}
	for _, tt := range tests {
		if got := EUCKRLen(tt.text); got != tt.len {
			t.Errorf("%s: EUCKRLen = %d, want %d", tt.name, got, tt.len)
		}
		if got := SMSKind(tt.text); got != tt.want {
			t.Errorf("%s: SMSKind = %q, want %q", tt.name, got, tt.want)
		}
	}
}
