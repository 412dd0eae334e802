package alimtalk

import (
	"strings"

	"herald/internal/notify"
)

// NormalizePhone turns a Korean mobile number in any usual writing — "010-1234-5678",
// "+82 10 1234 5678", "+82 (0)10-1234-5678", "+821012345678", "01012345678" — into the
// national form Solapi takes in "to": digits only, leading 0 ("01012345678").
//
// Anything else is refused with an EINVALID error whose message starts with
// notify.ReasonUnsupportedAddress: numbers of other countries, and Korean numbers that are
// not mobile (landlines such as 02-…, 050x "safe numbers", 070 internet phones, 080 toll-free),
// since a KakaoTalk account is tied to a mobile number and Kakao refuses the rest. The
// error never contains the number itself.
func NormalizePhone(phone string) (string, error) {
	var b strings.Builder
	for i, r := range strings.TrimSpace(phone) {
		switch {
		case r >= '0' && r <= '9':
			b.WriteRune(r)
		case r == '+' && i == 0:
			b.WriteRune(r)
		case r == ' ' || r == '-' || r == '.' || r == '(' || r == ')':
			// separators people write
		default:
			return "", unsupported("contains %q", r)
		}
	}
	s := b.String()
	switch {
	case strings.HasPrefix(s, "+82"):
		s = strings.TrimPrefix(s[3:], "0") // "+82 (0)10…" keeps the trunk 0 by mistake
		s = "0" + s
	case strings.HasPrefix(s, "+"):
		return "", unsupported("not a Korean number")
	case strings.HasPrefix(s, "0082"):
		s = "0" + strings.TrimPrefix(s[4:], "0")
	}
	if !isKoreanMobile(s) {
		return "", unsupported("not a Korean mobile number")
	}
	return s, nil
}

// isKoreanMobile reports whether s is a national mobile number: 010 and eight digits, or one of
// the older 011/016/017/018/019 prefixes with seven or eight.
func isKoreanMobile(s string) bool {
	if len(s) < 10 || len(s) > 11 || !strings.HasPrefix(s, "01") {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	switch s[2] {
	case '0':
		return len(s) == 11 && s[3] != '0' // 010-0xxx-xxxx is not issued
	case '1', '6', '7', '8', '9':
		return s[3] != '0'
	}
	return false
}

func unsupported(format string, args ...any) *notify.Error {
	e := notify.Errorf(notify.EINVALID, notify.ReasonUnsupportedAddress+": "+format, args...)
	e.Field = "address"
	return e
}
