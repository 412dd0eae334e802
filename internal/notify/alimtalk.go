package notify

import (
	"fmt"
	"maps"
	"regexp"
	"strings"
)

// AlimTalk content. An AlimTalk is a template registered with and approved by Kakao, filled in
// with variables: the content of the alimtalk channel carries the template code in
// Data[AlimTalkTemplateKey], each variable as a Data key written #{name}, and in Body the
// approved text with the variables substituted — the text Kakao compares with the template, and
// the text the SMS/LMS fallback sends. A stored template's channels.alimtalk holds the same
// shape with the body unsubstituted ("#{name}" placeholders filled from the send's data).
const AlimTalkTemplateKey = "alimtalk_template"

// alimTalkVarRe is a #{name} placeholder: Kakao's names take no spaces, dots or braces.
var alimTalkVarRe = regexp.MustCompile(`#\{([^\s.{}#]+)\}`)

// AlimTalkVariables lists the placeholder names of an approved text, in order, each once.
func AlimTalkVariables(text string) []string {
	var out []string
	for _, m := range alimTalkVarRe.FindAllStringSubmatch(text, -1) {
		if !containsString(out, m[1]) {
			out = append(out, m[1])
		}
	}
	return out
}

func containsString(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// validateAlimTalk checks the alimtalk content a send resolves to (field is where it came
// from): a template code is required, and a body, the text of the fallback.
func validateAlimTalk(field string, c Content) error {
	if strings.TrimSpace(c.Data[AlimTalkTemplateKey]) == "" {
		return FieldError(field+".data."+AlimTalkTemplateKey, "the alimtalk channel needs the approved template's code")
	}
	return nil
}

// fillAlimTalk substitutes the #{name} placeholders of c.Body with d's values and adds each as
// the Data key #{name}, the variables Solapi sends to Kakao. lenient fills a missing value with
// "" and reports it instead of refusing (previews).
func fillAlimTalk(field string, c Content, d map[string]any, lenient bool) (Content, []string, error) {
	names := AlimTalkVariables(c.Body)
	if len(names) == 0 {
		return c, nil, nil
	}
	data := maps.Clone(c.Data)
	if data == nil {
		data = map[string]string{}
	}
	var missing []string
	pairs := make([]string, 0, 2*len(names))
	for _, name := range names {
		v, ok := d[name]
		switch {
		case !ok && lenient:
			missing = append(missing, name)
			v = ""
		case !ok:
			return c, nil, FieldError("template.data."+name, "%s.body uses #{%s}, which the data lacks", field, name)
		}
		s := ""
		switch x := v.(type) {
		case string:
			s = x
		case map[string]any, []any:
			if !lenient {
				return c, nil, FieldError("template.data."+name, "#{%s} takes a text or a number", name)
			}
		default:
			s = fmt.Sprint(x)
		}
		data["#{"+name+"}"] = s
		pairs = append(pairs, "#{"+name+"}", s)
	}
	c.Body = strings.NewReplacer(pairs...).Replace(c.Body)
	c.Data = data
	return c, missing, nil
}

// NormalizeKoreanMobile turns a Korean mobile number in any usual writing into the national
// form AlimTalk takes ("01012345678"); anything else is an EINVALID error starting with
// ReasonUnsupportedAddress (the alimtalk package's NormalizePhone documents the rules).
func NormalizeKoreanMobile(phone string) (string, error) {
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
			return "", unsupportedPhone("contains %q", r)
		}
	}
	s := b.String()
	switch {
	case strings.HasPrefix(s, "+82"):
		s = strings.TrimPrefix(s[3:], "0") // "+82 (0)10…" keeps the trunk 0 by mistake
		s = "0" + s
	case strings.HasPrefix(s, "+"):
		return "", unsupportedPhone("not a Korean number")
	case strings.HasPrefix(s, "0082"):
		s = "0" + strings.TrimPrefix(s[4:], "0")
	}
	if !isKoreanMobile(s) {
		return "", unsupportedPhone("not a Korean mobile number")
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

func unsupportedPhone(format string, args ...any) *Error {
	e := Errorf(EINVALID, ReasonUnsupportedAddress+": "+format, args...)
	e.Field = "address"
	return e
}

// KoreanE164 is a national Korean number ("01012345678") in E.164 ("+821012345678"), the form
// the SMS provider takes.
func KoreanE164(national string) string { return "+82" + strings.TrimPrefix(national, "0") }

// Korean carriers' limits on a text message, in EUC-KR bytes: a short message (SMS) takes 90
// bytes — 90 ASCII characters or 45 Hangul syllables — and a long one (LMS) 2,000.
const (
	SMSMaxBytes = 90
	LMSMaxBytes = 2000
)

// Text message kinds, as Solapi and the carriers name them.
const (
	KindSMS = "SMS"
	KindLMS = "LMS"
)

// TextKind says which kind of text message carries text: KindSMS up to SMSMaxBytes, KindLMS up
// to LMSMaxBytes, and "" when text is longer than an LMS takes.
func TextKind(text string) string {
	switch n := EUCKRLen(text); {
	case n <= SMSMaxBytes:
		return KindSMS
	case n <= LMSMaxBytes:
		return KindLMS
	}
	return ""
}

// EUCKRLen is the length of text as carriers count it: one byte for ASCII, two for everything
// else (EUC-KR encodes Hangul, Hanja and symbols in two bytes; a character it lacks, such as an
// emoji, is counted as two as well, the most it could take once replaced).
func EUCKRLen(text string) int {
	n := 0
	for _, r := range text {
		if r < 0x80 {
			n++
		} else {
			n += 2
		}
	}
	return n
}
