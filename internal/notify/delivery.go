package notify

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// DeliveryStatus is the lifecycle of one delivery.
type DeliveryStatus string

const (
	DeliveryPending DeliveryStatus = "PENDING" // waiting to be sent (first time or after a retryable failure)
	DeliverySending DeliveryStatus = "SENDING" // claimed by a sender until LeaseUntil
	DeliverySent    DeliveryStatus = "SENT"
	DeliveryFailed  DeliveryStatus = "FAILED"
	DeliverySkipped DeliveryStatus = "SKIPPED"
	// DeliveryExpired: the notification's TTL passed before this delivery could be sent (it was
	// still retrying, held for quiet hours or queued), so it is never sent late. Counted as
	// failed with reason "expired".
	DeliveryExpired DeliveryStatus = "EXPIRED"
)

// Terminal reports whether s is an end state.
func (s DeliveryStatus) Terminal() bool {
	return s == DeliverySent || s == DeliveryFailed || s == DeliverySkipped || s == DeliveryExpired
}

// Reasons recorded on SKIPPED and FAILED deliveries.
const (
	ReasonOptedOut         = "opted_out"
	ReasonNoConsent        = "no_marketing_consent"
	ReasonQuietHours       = "quiet_hours"
	ReasonSuppressed       = "suppressed"
	ReasonNoAddress        = "no_address"
	ReasonUnregistered     = "unregistered" // dead token
	ReasonBounced          = "bounced"
	ReasonRejected         = "rejected" // provider refused (invalid number, bad payload…)
	ReasonRetriesExhausted = "retries_exhausted"
	ReasonCanceled         = "canceled"
	ReasonDuplicate        = "duplicate" // a bulk recipient repeated within its chunk, reached once
	ReasonExpired          = "expired"   // the reason EXPIRED deliveries are counted under
	// ReasonProviderAuth: the provider refused Herald's credentials, account or balance; the
	// delivery is not retried (the same credentials would be refused again), and operators hear
	// of it (notify.EventProviderAuthFailed).
	ReasonProviderAuth = "provider_auth"
)

// ReasonUnsupportedAddress is the skip reason for an address the provider cannot take at all
// (AlimTalk: a number that is not a Korean mobile number), so nothing is sent to it.
const ReasonUnsupportedAddress = "unsupported_address"

// ReasonUnreachable is the reason of an AlimTalk delivery KakaoTalk cannot reach (not a
// KakaoTalk user, AlimTalk blocked or unused for 72 hours). With a fallback it ends SKIPPED, its
// Detail naming the SMS delivery that carries the same text (whose Detail names it back), so the
// recipient is counted by that one outcome; without one it ends FAILED.
const ReasonUnreachable = "unreachable"

// Delivery is one notification × recipient × channel × address.
type Delivery struct {
	ID             string   `json:"id"`
	NotificationID string   `json:"notification_id"`
	UserID         string   `json:"user_id,omitempty"`
	Channel        Channel  `json:"channel"`
	Provider       Provider `json:"provider"`
	App            string   `json:"app,omitempty"`
	// Address is the raw token, email or phone. It travels in queue messages to the sender;
	// stores persist only AddressMasked.
	Address           string         `json:"-"`
	AddressMasked     string         `json:"address"`
	Status            DeliveryStatus `json:"status"`
	Reason            string         `json:"reason,omitempty"`
	Detail            string         `json:"detail,omitempty"`
	Attempts          int            `json:"attempts"`
	ProviderMessageID string         `json:"provider_message_id,omitempty"`
	LeaseUntil        time.Time      `json:"-"`
	UpdatedAt         time.Time      `json:"updated_at"`
	// History is the attempts before the one the fields above describe, oldest first: each
	// retried attempt's answer and when the next was due (the recipient view's timeline). Empty
	// for a delivery decided on its first attempt — nearly all of them — so it costs them nothing.
	History []Attempt `json:"history,omitempty"`
}

// Attempt is one earlier attempt of a delivery: when it ended, what the provider answered (a
// retryable error's code and message), and when the retry was due.
type Attempt struct {
	Attempt int            `json:"attempt"`
	At      time.Time      `json:"at"`
	Status  DeliveryStatus `json:"status"`
	Reason  string         `json:"reason,omitempty"`
	Detail  string         `json:"detail,omitempty"`
	RetryAt time.Time      `json:"retry_at,omitzero"`
}

// MaxHistory is the most earlier attempts a delivery keeps (the oldest are dropped), and
// maxAttemptDetail the most bytes of an answer's message each keeps: a retried delivery's
// record stays well under a DynamoDB write unit's kilobyte or two.
const (
	MaxHistory       = 8
	maxAttemptDetail = 240
)

// WithAttempt is h with a, the oldest dropped beyond MaxHistory and a's detail shortened (at a
// UTF-8 boundary); h itself is not changed.
func WithAttempt(h []Attempt, a Attempt) []Attempt {
	if len(a.Detail) > maxAttemptDetail {
		cut := maxAttemptDetail
		for cut > 0 && !utf8.RuneStart(a.Detail[cut]) {
			cut--
		}
		a.Detail = a.Detail[:cut] + "…"
	}
	out := make([]Attempt, 0, min(len(h)+1, MaxHistory))
	if len(h)+1 > MaxHistory {
		h = h[len(h)+1-MaxHistory:]
	}
	return append(append(out, h...), a)
}

// DeliveryID is deterministic, so a redelivered prepare step creates the same deliveries and the
// store's create-if-absent makes it idempotent.
func DeliveryID(notificationID string, c Channel, address string) string {
	// The hashed text is built on the stack for the usual lengths, and the id is one allocation:
	// prepare makes one per recipient.
	var in [256]byte
	b := append(in[:0], notificationID...)
	b = append(b, 0)
	b = append(b, c...)
	b = append(b, 0)
	b = append(b, address...)
	h := sha256.Sum256(b)
	var id [2 + 24]byte
	id[0], id[1] = 'd', '_'
	hex.Encode(id[2:], h[:12])
	return string(id[:])
}

// AddressKey is the stable, non-reversible key stores use for an address (suppression lookups).
func AddressKey(c Channel, address string) string {
	h := sha256.Sum256([]byte(string(c) + "\x00" + NormalizeAddress(c, address)))
	return hex.EncodeToString(h[:16])
}

// NormalizeAddress lower-cases emails and trims spaces, so "A@x.com " and "a@x.com" match.
func NormalizeAddress(c Channel, address string) string {
	a := strings.TrimSpace(address)
	if c == ChannelEmail {
		a = strings.ToLower(a)
	}
	return a
}

// DeliveryUpdate is a sender's verdict on one claimed delivery.
type DeliveryUpdate struct {
	ID string
	// Status is SENT, FAILED, SKIPPED or EXPIRED; PENDING to release for a retry; or SENDING with
	// LeaseUntil for a message the provider accepted whose verdict comes later
	// (SendResult.VerdictPending): it stays claimed until LeaseUntil, and counts nothing yet.
	Status            DeliveryStatus
	Reason            string
	Detail            string
	ProviderMessageID string
	At                time.Time
	LeaseUntil        time.Time // only with SENDING
	// History, when not empty, replaces the delivery's earlier attempts (Delivery.History): a
	// retry's outcome carries the attempts before it. Empty leaves them as they are.
	History []Attempt
}

// ValidVerdict reports whether u's status is one CompleteDeliveries takes.
func (u DeliveryUpdate) ValidVerdict() bool {
	return u.Status == DeliveryPending || u.Status.Terminal() || (u.Status == DeliverySending && !u.LeaseUntil.IsZero())
}

// CheckRecorded is the check every store's RecordBatch makes of ds before it stores any of
// them: each needs an id, belongs to notificationID (or names none), and has a terminal status
// or PENDING (a retry to come). The error names the field.
func CheckRecorded(notificationID string, ds []Delivery) error {
	for i, d := range ds {
		switch {
		case d.ID == "":
			return FieldError(fmt.Sprintf("deliveries[%d].id", i), "delivery id is required")
		case d.NotificationID != "" && d.NotificationID != notificationID:
			return FieldError(fmt.Sprintf("deliveries[%d].notification_id", i), "belongs to another notification")
		case d.Status != DeliveryPending && !d.Status.Terminal():
			return FieldError(fmt.Sprintf("deliveries[%d].status", i),
				"a recorded delivery is SENT, FAILED, SKIPPED, EXPIRED, or PENDING with a retry to come, not %q", d.Status)
		}
	}
	return nil
}
