package alimtalk

import "herald/internal/notify"

// NormalizePhone turns a Korean mobile number in any usual writing — "010-1234-5678",
// "+82 10 1234 5678", "+82 (0)10-1234-5678", "+821012345678", "01012345678" — into the
// national form Solapi takes in "to": digits only, leading 0 ("01012345678").
//
// Anything else is refused with an EINVALID error whose message starts with
// notify.ReasonUnsupportedAddress: numbers of other countries, and Korean numbers that are
// not mobile (landlines such as 02-…, 050x "safe numbers", 070 internet phones, 080 toll-free),
// since a KakaoTalk account is tied to a mobile number and Kakao refuses the rest. The
// error never contains the number itself.
func NormalizePhone(phone string) (string, error) { return notify.NormalizeKoreanMobile(phone) }
