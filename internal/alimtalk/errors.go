package alimtalk

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"herald/internal/notify"
)

// statusCodes is the one table turning Solapi's four-digit message status codes
// (docs.solapi.com/api-reference/message-status-codes) into Herald's: "" is sent, and every
// other entry is a failure code. 1xxx codes come back at once, in the send response's
// failedMessageList; 3xxx codes — KakaoTalk's verdicts among them — are reported by Solapi once
// Kakao or the carrier answered (message list, webhooks), and classify the same way here.
// Codes not listed fall back to their family (see statusCode).
var statusCodes = map[string]string{
	// accepted and on its way, or delivered
	"2000": "", // accepted (정상 접수)
	"3000": "", // handed to Kakao or the carrier, report pending
	"4000": "", // received by the recipient

	// not reachable by KakaoTalk: permanent for AlimTalk, and the SMS/LMS fallback's trigger
	"3104": notify.EUNREACHABLE, // not a KakaoTalk user (카카오톡 미사용자)
	"3107": notify.EUNREACHABLE, // no KakaoTalk use in 72 hours, or the user blocked AlimTalk
	"3102": notify.EUNREACHABLE, // not a friend of the channel (a FriendTalk-only condition)

	// the message or our setup is wrong: permanent
	"1010": notify.EREJECTED,    // a required field is missing
	"1011": notify.EREJECTED,    // format error
	"1025": notify.EREJECTED,    // unknown message type
	"1026": notify.EREJECTED,    // duplicate recipient in one request
	"1027": notify.EREJECTED,    // not UTF-8
	"1028": notify.EREJECTED,    // non-printable characters
	"1029": notify.EREJECTED,    // characters outside EUC-KR (SMS)
	"1031": notify.ETOOLARGE,    // text over the type's limit (ATA: 1,000 characters)
	"1032": notify.EREJECTED,    // invalid customFields
	"1033": notify.EREJECTED,    // kakaoOptions on a message that is not ATA/CTA
	"1041": notify.EREJECTED,    // unknown KakaoTalk channel (pfId): a bad sender key
	"1042": notify.EREJECTED,    // unknown template id
	"1043": notify.EREJECTED,    // text differs from the registered template
	"1044": notify.EREJECTED,    // invalid button
	"1045": notify.EREJECTED,    // invalid button URL
	"1046": notify.EREJECTED,    // the template has buttons: send them
	"1047": notify.EREJECTED,    // the template has no buttons
	"1048": notify.EREJECTED,    // button URL over 100 characters
	"1049": notify.EREJECTED,    // button name over 14 characters
	"1050": notify.EREJECTED,    // more than 5 buttons
	"1052": notify.EREJECTED,    // buttons not in the template's order
	"1058": notify.EREJECTED,    // no route
	"1062": notify.EREJECTED,    // sender number not registered
	"1064": notify.EREJECTED,    // blocked after a KISA report
	"2011": notify.EREJECTED,    // format error
	"2062": notify.EREJECTED,    // sender number not registered
	"2064": notify.EREJECTED,    // blocked after a KISA report
	"2254": notify.EREJECTED,    // classified as spam
	"3010": notify.EREJECTED,    // invalid recipient number
	"3101": notify.EREJECTED,    // invalid sender profile key
	"3103": notify.EREJECTED,    // message does not match the template (variables, buttons)
	"3105": notify.EREJECTED,    // template not registered
	"3106": notify.EREJECTED,    // invalid channel id
	"3108": notify.EREJECTED,    // outside the hours Kakao allows (quiet hours are Herald's to keep)
	"3032": notify.EDEADADDRESS, // the number has no subscriber

	// the recipient opted out of messages from this account
	"1060": notify.ESUPPRESSED, // recipient number blocked
	"1061": notify.ESUPPRESSED, // opted out through the 080 number
	"2060": notify.ESUPPRESSED,
	"2061": notify.ESUPPRESSED,

	// the account cannot send until an operator acts (credentials, balance, a blocked account):
	// retried, like refused credentials
	"1020": notify.EAUTH, // unknown account or wrong password
	"1030": notify.EAUTH, // balance exhausted
	"2063": notify.EAUTH, // account blocked
	"2230": notify.EAUTH, // balance exhausted

	// transient on Solapi's, Kakao's or the carrier's side: retried
	"1024": notify.EUNAVAILABLE, // server error
	"2024": notify.EUNAVAILABLE,
	"3012": notify.EUNAVAILABLE, // partner server error
	"3024": notify.EUNAVAILABLE,
	"3040": notify.EUNAVAILABLE, // timed out
	"3041": notify.EUNAVAILABLE, // handset busy
	"3042": notify.EUNAVAILABLE, // out of coverage
	"3043": notify.EUNAVAILABLE, // handset off
	"3044": notify.EUNAVAILABLE, // handset storage full
	"3053": notify.ETHROTTLED,   // carrier queue full
	"3056": notify.EUNAVAILABLE, // radio network failure
	"3057": notify.EUNAVAILABLE,
}

// statusCode classifies a Solapi status code: sent ("") or a notify code. An unlisted 1xxx,
// 2xxx or 3xxx code is a refusal of this message (EREJECTED); anything else (TEST1000, a code
// Solapi added since) is EUNKNOWNSTATUS: permanent, since the message may well have gone out,
// and a resend could deliver it twice.
func statusCode(code string) string {
	if c, ok := statusCodes[code]; ok {
		return c
	}
	if len(code) == 4 && strings.ContainsAny(code[:1], "123") {
		return notify.EREJECTED
	}
	return notify.EUNKNOWNSTATUS
}

// errorCodes maps the errorCode of Solapi's non-2xx answers ({"errorCode", "errorMessage"}) to
// Herald's; the rest are decided by the HTTP status.
var errorCodes = map[string]string{
	"InvalidAPIKey":         notify.EAUTH, // 403
	"SignatureDoesNotMatch": notify.EAUTH, // 403
	"RequestTimeTooSkewed":  notify.EAUTH, // 403: this machine's clock is off
	"DuplicatedSignature":   notify.EAUTH, // 403: a signature reused within 15 minutes
	"ValidationError":       notify.EREJECTED,
}

// apiError is Solapi's error body.
type apiError struct {
	ErrorCode    string `json:"errorCode"`
	ErrorMessage string `json:"errorMessage"`
}

// classifyStatus is the error for a message Solapi answered with a failing status code.
func classifyStatus(code, message, deliveryID, phone string) *notify.Error {
	return &notify.Error{
		Code:    statusCode(code),
		Message: redact(fmt.Sprintf("alimtalk send %s to %s: %s %s", deliveryID, notify.MaskPhone(phone), code, message), phone),
	}
}

// classifyHTTP is the error for a request that got no 2xx: status 0 when there was no response
// (err says why), body the error Solapi sent if any.
func classifyHTTP(err error, status int, body apiError, retryAfter time.Duration, deliveryID, phone string) *notify.Error {
	code, ok := errorCodes[body.ErrorCode]
	switch {
	case status == http.StatusTooManyRequests:
		code = notify.ETHROTTLED
	case ok:
	case status >= 500:
		code = notify.EUNAVAILABLE
	case notify.CodeForStatus(status) != "":
		code = notify.CodeForStatus(status)
	case status == 0 && notify.NoResponse(err):
		code = notify.EUNAVAILABLE
	default:
		code = notify.EINTERNAL
	}
	what := notify.Failure(err, status)
	if body.ErrorCode != "" {
		what = strings.TrimSpace(body.ErrorCode + " " + body.ErrorMessage)
	}
	return &notify.Error{
		Code:       code,
		Message:    redact(fmt.Sprintf("alimtalk send %s to %s: %s", deliveryID, notify.MaskPhone(phone), what), phone),
		RetryAfter: retryAfter,
		Err:        notify.Redact(err, phone, notify.MaskPhone(phone)),
	}
}

// redact masks phone in s, in the writings Solapi may echo it (as given and normalized).
func redact(s, phone string) string {
	if phone == "" {
		return s
	}
	mask := notify.MaskPhone(phone)
	pairs := []string{phone, mask}
	if n, err := NormalizePhone(phone); err == nil && n != phone {
		pairs = append(pairs, n, mask)
	}
	return strings.NewReplacer(pairs...).Replace(s)
}
