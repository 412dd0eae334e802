package alimtalk

import "herald/internal/notify"

// Korean carriers' limits on the fallback text, in EUC-KR bytes (notify keeps them: the pipeline
// decides the fallback's kind).
const (
	SMSMaxBytes = notify.SMSMaxBytes
	LMSMaxBytes = notify.LMSMaxBytes
)

// Fallback message kinds, as Solapi and the carriers name them.
const (
	KindSMS = notify.KindSMS
	KindLMS = notify.KindLMS
)

// SMSKind says which kind of text message carries text when an AlimTalk delivery falls back to
// SMS: KindSMS up to SMSMaxBytes, KindLMS up to LMSMaxBytes, and "" when text is longer than an
// LMS takes (the caller shortens it first).
func SMSKind(text string) (kind string) { return notify.TextKind(text) }

// EUCKRLen is the length of text as carriers count it (notify.EUCKRLen).
func EUCKRLen(text string) int { return notify.EUCKRLen(text) }
