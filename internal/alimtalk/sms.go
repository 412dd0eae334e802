package alimtalk

// Korean carriers' limits on the fallback text, in EUC-KR bytes: a short message (SMS) takes 90
// bytes — 90 ASCII characters or 45 Hangul syllables — and a long one (LMS) 2,000.
const (
	SMSMaxBytes = 90
	LMSMaxBytes = 2000
)

// Fallback message kinds, as Solapi and the carriers name them.
const (
	KindSMS = "SMS"
	KindLMS = "LMS"
)

// SMSKind says which kind of text message carries text when an AlimTalk delivery falls back to
// SMS: KindSMS up to SMSMaxBytes, KindLMS up to LMSMaxBytes, and "" when text is longer than an
// LMS takes (the caller shortens it first).
func SMSKind(text string) (kind string) {
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
