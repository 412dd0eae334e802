package notify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"sync"
	"time"
)

// Erasure is a user's request to have everything Herald holds on them removed (DELETE
// /v1/users/{user}; docs/design/security.md, "Erasure"). Its record names the user by UserHash
// only once it has finished; while it runs it also keeps the user id, so a crashed erasure can
// be resumed.
type Erasure struct {
	UserHash    string     `json:"user_hash"`
	UserID      string     `json:"-"` // "" once finished
	Status      string     `json:"status"`
	Actor       string     `json:"actor"`        // the service (or operator) that asked
	RequestedAt time.Time  `json:"requested_at"` // deliveries of notifications created before it are never sent
	FinishedAt  *time.Time `json:"finished_at,omitempty"`
	// Step and Cursor are where a running erasure goes on from: the index in ErasureSteps and
	// the store's cursor within that step.
	Step   int    `json:"-"`
	Cursor string `json:"-"`
	// Removed counts what each step removed or rewrote, by step name.
	Removed map[string]int `json:"removed"`
}

// Erasure statuses.
const (
	ErasureRunning  = "erasing"
	ErasureFinished = "erased"
)

// ReasonErased is the skip reason of a delivery whose user was erased after its notification
// was created: it is never sent.
const ReasonErased = "erased"

// ErasureWindow is how long an erasure's tombstone is consulted: a delivery of a notification
// created before the erasure and still in flight this long after it is not held back by it (no
// notification stays in flight that long: the longest wait, quiet hours, is a night).
const ErasureWindow = 14 * 24 * time.Hour

// ErasureRetention is how long a finished erasure's record (the user's hash, when, who asked,
// what was removed) is kept.
const ErasureRetention = 365 * 24 * time.Hour

// UserHash is the one-way hash an erased user's id is replaced with in the records that stay
// (deliveries, the notifications sent to them), so counts stay true and nothing names them.
// Like AddressKey it is not keyed: whoever knows an id can tell whether it was erased, which is
// what answers "was this user erased?".
func UserHash(userID string) string {
	h := sha256.Sum256([]byte("user\x00" + userID))
	return "erased:" + hex.EncodeToString(h[:16])
}

// IsUserHash reports whether id is a UserHash.
func IsUserHash(id string) bool { return strings.HasPrefix(id, "erased:") }

// Erasure steps, in the order they run (ErasureSteps). The suppressions of the user's addresses
// are rewritten before the contact that names those addresses is removed.
const (
	EraseSuppressions = "suppressions" // the user's addresses' suppressions keep only the hash
	EraseContact      = "contact"      // the sealed contact and the owners of its addresses
	EraseDevices      = "devices"      // push registrations and web push subscriptions
	ErasePreferences  = "preferences"
	EraseInbox        = "inbox"         // inbox items and broadcast markers
	EraseLists        = "list_members"  // memberships of uploaded audience lists
	EraseSent         = "notifications" // notifications to the user alone: id hashed, content and addresses dropped
	EraseDeliveries   = "deliveries"    // delivery records: user id hashed, address and provider detail dropped
)

// ErasureSteps is every step of an erasure, in order.
var ErasureSteps = []string{EraseSuppressions, EraseContact, EraseDevices, ErasePreferences, EraseInbox, EraseLists, EraseSent, EraseDeliveries}

// ErasureStore keeps erasures and does their steps. Every adapter passes the conformance cases
// in internal/notify/storetest.
type ErasureStore interface {
	// BeginErasure stores e, running, with its tombstone at e.RequestedAt — unless an erasure of
	// e.UserHash is running: then it returns that one and created=false (the caller resumes it).
	// A finished erasure of the same user is replaced (a user registered again and erased again).
	// EINVALID without UserHash, UserID or RequestedAt.
	BeginErasure(ctx context.Context, e Erasure) (stored Erasure, created bool, err error)
	// SaveErasure replaces the record of a running erasure (a checkpoint, or its finish: a
	// finished erasure is stored without its user id). ENOTFOUND if there is none.
	SaveErasure(ctx context.Context, e Erasure) error
	// GetErasure returns the erasure of the user whose UserHash is hash; ENOTFOUND.
	GetErasure(ctx context.Context, hash string) (Erasure, error)
	// ErasedSince returns the user hashes with an erasure begun at or after since, with when.
	ErasedSince(ctx context.Context, since time.Time) (map[string]time.Time, error)
	// EraseStep does a bounded part of step (one of ErasureSteps) for userID from cursor ("" to
	// start): removes, or rewrites under UserHash, what the step covers. It returns how many
	// records it changed and the cursor to go on from, "" when the step is done. Every call is
	// idempotent: a step run again from any cursor it returned, or from "", ends the same.
	// EINVALID for an unknown step.
	EraseStep(ctx context.Context, userID, step, cursor string) (changed int, next string, err error)
}

// ErasedBefore reports whether an erasure in erased (ErasedSince's answer) holds back a
// delivery to userID of a notification created at created: the user was erased after it.
func ErasedBefore(erased map[string]time.Time, userID string, created time.Time) bool {
	if len(erased) == 0 || userID == "" {
		return false
	}
	at, ok := erased[UserHash(userID)]
	return ok && !at.Before(created)
}

// EraseRecipients rewrites userID's entries of rs under UserHash, dropping the addresses they
// carried, and reports how many it changed.
func EraseRecipients(rs []Recipient, userID string) int {
	n := 0
	for i := range rs {
		if rs[i].UserID == userID {
			rs[i] = Recipient{UserID: UserHash(userID)}
			n++
		}
	}
	return n
}

// EraseDelivery rewrites d, a delivery to the erased user, as it is kept: the user id hashed,
// the masked address and the provider's words (which may quote it) dropped, the status, reason
// and times kept, so the counts stay true.
func EraseDelivery(d *Delivery) {
	if d.UserID != "" && !IsUserHash(d.UserID) {
		d.UserID = UserHash(d.UserID)
	}
	d.AddressMasked, d.Detail = "", ""
	for i := range d.History {
		d.History[i].Detail = ""
	}
}

// EraseNotification rewrites n, a notification sent to userID alone (IndexedUser), as it is
// kept after the user's erasure: its recipients and express deliveries under UserHash, and its
// content, which was written for them, dropped. Its status, counts, category and template name
// stay. It reports whether anything changed.
func EraseNotification(n *Notification, userID string) bool {
	changed := EraseRecipients(n.Recipients, userID) > 0
	if !n.Content.IsZero() || n.ChannelContent != nil || n.Localized != nil {
		n.Content, n.ChannelContent, n.Localized = Content{}, nil, nil
		changed = true
	}
	if n.Express != nil {
		for i := range n.Express.Deliveries {
			d := &n.Express.Deliveries[i]
			if d.UserID == userID || d.AddressMasked != "" || d.Detail != "" {
				EraseDelivery(d)
				changed = true
			}
		}
	}
	return changed
}

// ErasureLag is how long the stages keep the tombstones they read (Tombstones): an erasure
// finishes no sooner than twice this after it began, so by then every delivery still to be
// sent to the user is held back.
const ErasureLag = time.Second

// Tombstones is the stages' view of recent erasures (ErasedSince over ErasureWindow), read again
// at most every ErasureLag: one small read per stage instance every two seconds, however many
// deliveries it sends, and nothing hashed while no user was erased.
type Tombstones struct {
	Store ErasureStore
	Clock Clock // nil: the system clock

	mu  sync.Mutex
	at  time.Time
	set map[string]time.Time
}

// Erased returns the recent erasures (see ErasedBefore). A failed read is an error: the caller
// must not send what it cannot check.
func (t *Tombstones) Erased(ctx context.Context) (map[string]time.Time, error) {
	if t == nil || t.Store == nil {
		return nil, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.set != nil && time.Since(t.at) < ErasureLag { // kept by the wall clock's monotonic reading
		return t.set, nil
	}
	now := time.Now()
	if t.Clock != nil {
		now = t.Clock.Now()
	}
	set, err := t.Store.ErasedSince(ctx, now.Add(-ErasureWindow))
	if err != nil {
		return nil, Wrap(EUNAVAILABLE, err, "read erasures")
	}
	t.set, t.at = set, time.Now()
	return set, nil
}
