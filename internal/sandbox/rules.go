package sandbox

import (
	"regexp"
	"strconv"
	"strings"
)

// Failure injection is decided by the address alone, so a test or a demo picks the path it wants
// by choosing the address:
//
//	device token containing "unregistered"   FCM 404 UNREGISTERED / APNs 410 Unregistered
//	device token containing "invalid"        FCM 400 INVALID_ARGUMENT / APNs 400 BadDeviceToken
//	any address containing "throttle<N>"     429 (with Retry-After: 1) for the first N attempts, then accepted
//	any address containing "unavailable<N>"  503 for the first N attempts, then accepted (every provider)
//	email bounce@simulator.amazonses.com     accepted, then an SES Permanent bounce arrives (SNS-wrapped)
//	  or any email whose local part ends "+bounce"
//	email complaint@simulator.amazonses.com  accepted, then an SES Complaint arrives
//	  or any email whose local part ends "+complaint"
//	email ooto@simulator.amazonses.com       accepted, then a Transient bounce arrives
//	phone +15005550001                       Twilio 400 code 21211 (invalid 'To' phone number)
//	phone +15005550009                       Twilio 400 code 21614 (not a mobile number)
//	phone +1500555429N (N = 1..9)            Twilio 429 code 20429 for the first N attempts, then accepted
//	Twilio password starting with "invalid"  401 code 20003 (authentication failed)
//	AlimTalk phone ending 0001 or 0011       accepted (2000), then Kakao's 3104 (not a KakaoTalk user: fall
//	                                         back to SMS) late: the message list reports 3000 (pending) first,
//	                                         the verdict from its second report on, as Solapi does
//	AlimTalk phone ending 0002 or 0012       the same with 3107 (blocked AlimTalk, or no KakaoTalk in 72 hours)
//	AlimTalk phone ending 0010               accepted, then delivered late (3000 first, then 4000); every
//	                                         other accepted AlimTalk is listed 4000 (received) at once
//	AlimTalk phone 0105555429N / 0105555503N 429 / 503 for the first N attempts, then accepted
//	AlimTalk template containing "mismatch"  Solapi 1043 at send time (text differs from the template)
//	AlimTalk template containing "unregistered"  Solapi 1042 at send time (unknown template id)
//	AlimTalk template containing "lost<N>"   each phone's first N sends accepted and stored, and the
//	                                         connection dropped before the answer (outcome unknown)
//	AlimTalk template containing "throttle<N>" or "unavailable<N>"  429 / 503 for each phone's first N attempts
//	AlimTalk pfId containing "invalid"       Solapi 1041 (unknown KakaoTalk channel)
//	AlimTalk API key not trusted, bad or reused signature  403 InvalidAPIKey / SignatureDoesNotMatch / DuplicatedSignature
//	web push subscription labelled "gone"    410 Gone (minted with {"label": "gone"}; see webpush.go)
//	web push subscription labelled "toolarge" 413 Payload Too Large
//	web push label "throttle<N>"/"unavailable<N>"  as for any address above
//
// Every other address is accepted.

var countRe = regexp.MustCompile(`(throttle|unavailable)(\d+)`)

// injected returns the injected failure kind for address ("throttle", "unavailable" or "") and
// how many attempts it lasts.
func injected(address string) (kind string, n int) {
	// The cheap checks first: this runs for every message the sandbox receives.
	if strings.Contains(address, "throttle") || strings.Contains(address, "unavailable") {
		if m := countRe.FindStringSubmatch(address); m != nil {
			n, _ = strconv.Atoi(m[2])
			return m[1], n
		}
	}
	if strings.HasPrefix(address, "+1500555429") && len(address) == 12 {
		n, _ = strconv.Atoi(address[11:])
		return "throttle", n
	}
	return "", 0
}

// failNow reports whether this attempt for address should get the injected transient failure,
// and which one.
func (s *Server) failNow(address string) (kind string, fail bool) {
	kind, n := injected(address)
	if kind == "" {
		return "", false
	}
	return kind, s.attempt(address) <= n
}

// sesFeedback returns the SES feedback an email address triggers: "Bounce/Permanent",
// "Bounce/Transient", "Complaint" or "".
func sesFeedback(email string) string {
	e := strings.ToLower(email)
	local, _, _ := strings.Cut(e, "@")
	switch {
	case e == "bounce@simulator.amazonses.com" || strings.HasSuffix(local, "+bounce"):
		return "Bounce/Permanent"
	case e == "ooto@simulator.amazonses.com":
		return "Bounce/Transient"
	case e == "complaint@simulator.amazonses.com" || strings.HasSuffix(local, "+complaint"):
		return "Complaint"
	}
	return ""
}
