package notify

import (
	"context"
	"time"
)

// Store is everything Herald persists. Every adapter (SQLite locally, DynamoDB in AWS) passes
// the conformance suite in internal/notify/storetest.
type Store interface {
	NotificationStore
	DeliveryStore
	ExpressStore
	BatchStore
	UserStore
	SuppressionStore
	InboxStore
	TemplateStore
}

// NotificationStore keeps notifications and their aggregates.
type NotificationStore interface {
	// CreateNotification stores n (with its Recipients) with n.Status unless a notification with the same
	// (Service, IdempotencyKey) or the same ID exists; then it returns the stored one and
	// created=false. An empty IdempotencyKey never dedupes.
	CreateNotification(ctx context.Context, n *Notification) (stored *Notification, created bool, err error)
	// GetNotification returns the notification without its Recipients (RecipientCount says how
	// many there are; GetRecipients pages them), so the hot reads of status and counters never
	// decode a 10,000-entry list. ENOTFOUND if id is unknown.
	GetNotification(ctx context.Context, id string) (*Notification, error)
	// GetRecipients returns recipients [offset, offset+limit) of id in the order they were given,
	// fewer at the end. ENOTFOUND if id is unknown.
	GetRecipients(ctx context.Context, id string, offset, limit int) ([]Recipient, error)
	// SetNotificationStatus moves id to status `to` if its current status is one of from (any
	// status when from is empty). ECONFLICT if the current status is not in from; ENOTFOUND.
	SetNotificationStatus(ctx context.Context, id string, to NotificationStatus, from ...NotificationStatus) error
	// SetChunksTotal records how many prepare chunks the notification was split into. It is
	// idempotent: setting the same value again is a no-op.
	SetChunksTotal(ctx context.Context, id string, chunks int) error
	// ClaimKey is the HTTP API's claim of an idempotency key, taken before a request is queued,
	// so of racing requests under one key exactly one is accepted: the first claim of
	// (k.Service, k.Key) is stored and won; every later one returns the claim that holds the key
	// (won=false), whose Fingerprint tells a retry of the same request from another request. A
	// claim is never removed: a key names one notification for good, as CreateNotification
	// dedupes. EINVALID without a service, key, notification id or fingerprint.
	ClaimKey(ctx context.Context, k KeyClaim) (held KeyClaim, won bool, err error)
	// ScheduledLister pages the SCHEDULED notifications (see its contract in reserved.go).
	ScheduledLister
}

// KeyClaim is the claim of an idempotency key by the HTTP API (NotificationStore.ClaimKey).
type KeyClaim struct {
	Service        string
	Key            string
	NotificationID string
	Fingerprint    string // RequestFingerprint of the request that claimed the key
	At             time.Time
}

// Check reports a claim missing one of its fields, naming it.
func (k KeyClaim) Check() error {
	switch {
	case k.Service == "":
		return Errorf(EINVALID, "key claim: service is required")
	case k.Key == "":
		return Errorf(EINVALID, "key claim: key is required")
	case k.NotificationID == "":
		return Errorf(EINVALID, "key claim: notification id is required")
	case k.Fingerprint == "":
		return Errorf(EINVALID, "key claim: fingerprint is required")
	}
	return nil
}

// NoChunk is the chunk of CreateDeliveries for deliveries created after prepare, outside any
// prepare chunk: they are idempotent by their IDs alone.
const NoChunk = -1

// DeliveryStore keeps per-delivery state and the notification counters derived from it. Counter
// changes happen atomically with the delivery transitions that cause them, so a redelivered
// message never counts twice.
type DeliveryStore interface {
	// CreateDeliveries inserts each delivery whose ID does not exist yet, adds the inserted ones to
	// the notification's Stats (Total, and Sent/Failed/Skipped for those created terminal), and
	// marks prepare chunk `chunk` of the notification as prepared — all as one step; a chunk
	// already marked changes nothing. It returns the IDs among ds that are PENDING now (new or
	// left from an earlier attempt), i.e. the ones still to be sent. Chunk NoChunk creates
	// deliveries born after prepare (an AlimTalk delivery's SMS fallback): each is inserted and
	// counted if its ID does not exist yet, and no chunk is marked or counted.
	CreateDeliveries(ctx context.Context, notificationID string, chunk int, ds []Delivery) (pending []string, err error)
	// ClaimDeliveries moves each listed delivery that is PENDING, or SENDING with LeaseUntil
	// before now, to SENDING with LeaseUntil = leaseUntil and Attempts+1, and returns the claimed
	// deliveries. It also returns as busy the IDs that are SENDING under a lease still running at
	// now (someone else — or an earlier, crashed attempt — holds them): the caller must come back
	// for those, since nothing else will. Terminal and unknown IDs, and IDs of another
	// notification's deliveries, are in neither list.
	ClaimDeliveries(ctx context.Context, notificationID string, ids []string, now, leaseUntil time.Time) (claimed []Delivery, busy []string, err error)
	// CompleteDeliveries applies senders' verdicts to deliveries that are SENDING. A terminal
	// verdict (SENT, FAILED, SKIPPED, EXPIRED: see CountDelivery) adds to the notification's
	// Stats atomically; PENDING releases for a retry; SENDING with LeaseUntil (accepted, verdict
	// to come) keeps the delivery SENDING under that lease, records its ProviderMessageID, Reason
	// and Detail, and counts nothing. Updates for deliveries not in SENDING are ignored; any
	// other status is an EINVALID. Returns how many were applied.
	CompleteDeliveries(ctx context.Context, notificationID string, updates []DeliveryUpdate) (int, error)
	// ListDeliveries pages a notification's deliveries, each once, in an order the store keeps
	// stable (DynamoDB: id order; SQLite: the order they were stored, which keeps storing them
	// cheap); cursor "" starts, next "" means the end.
	ListDeliveries(ctx context.Context, notificationID, cursor string, limit int) (ds []Delivery, next string, err error)
}

// BatchStore is the idempotency of send batches claimed whole: one record per prepared chunk
// and one per send batch (at most a provider batch, e.g. 500 tokens), never one per recipient —
// what keeps a million-recipient campaign at a few thousand store writes. The realtime lane
// claims its batches the same way and stores each delivery once, with its outcome
// (RecordBatch); its AlimTalk deliveries are claimed and completed one by one (DeliveryStore).
type BatchStore interface {
	// ChunkPrepared reports whether chunk of the notification is marked prepared (by
	// AddChunk or CreateDeliveries). ENOTFOUND if the notification is unknown.
	ChunkPrepared(ctx context.Context, notificationID string, chunk int) (bool, error)
	// AddChunk marks chunk prepared and adds delta (every resolved delivery to Total, and those
	// decided at prepare — skipped, inbox — to their outcome, and the chunk's recipients to
	// Stats.MembersPrepared through CountMembers) to the notification's Stats, as one step. A chunk already marked changes nothing and returns added=false. ENOTFOUND.
	AddChunk(ctx context.Context, notificationID string, chunk int, delta map[Channel]ChannelStats) (added bool, err error)
	// ClaimBatch leases send batch batchID of the notification until leaseUntil: a batch never
	// seen, or SENDING under a lease that ended before now, becomes SENDING with Attempts+1 and
	// is BatchClaimed; one SENDING under a live lease is BatchBusy; a completed one is
	// BatchDone. Claiming an unknown notification's batch is ENOTFOUND.
	ClaimBatch(ctx context.Context, notificationID, batchID string, now, leaseUntil time.Time) (BatchClaim, error)
	// CompleteBatch marks a SENDING batch done and adds delta (its terminal outcomes) to the
	// notification's Stats atomically. A batch not SENDING (done, or never claimed) changes
	// nothing and returns false.
	CompleteBatch(ctx context.Context, notificationID, batchID string, delta map[Channel]ChannelStats, at time.Time) (bool, error)
	// RecordBatch completes SENDING batch batchID with its deliveries, each stored once with its
	// outcome (Notification.BatchClaims): a delivery of ds (status SENT, FAILED, SKIPPED,
	// EXPIRED, or PENDING with a retry batch to come) is stored unless one with its id exists
	// that is neither PENDING nor stored by this same batch; the outcome of each one stored is
	// counted in the notification's Stats (not its Total, which its chunk counted, AddChunk), and
	// the batch is marked done. A store that cannot do all of that as one step stores the
	// deliveries first, so a batch re-run after a crash stores and counts each delivery once. A
	// batch not SENDING (done, or never claimed) changes nothing and returns false. ENOTFOUND;
	// EINVALID for a status not listed or a delivery of another notification.
	RecordBatch(ctx context.Context, notificationID, batchID string, ds []Delivery, at time.Time) (bool, error)
}

// BatchState is what ClaimBatch found.
type BatchState string

const (
	BatchClaimed BatchState = "CLAIMED" // the caller holds the lease and sends
	BatchBusy    BatchState = "BUSY"    // another worker's lease is running: come back later
	BatchDone    BatchState = "DONE"    // already sent and recorded: nothing to do
)

// BatchClaim is ClaimBatch's answer.
type BatchClaim struct {
	State    BatchState
	Attempts int // after this claim
	// LeaseUntil, for BatchBusy, is when the other worker's lease ends: the batch can be
	// claimed again from then on, so a caller that comes back then waits no longer than it must.
	LeaseUntil time.Time
}

// BusyFor is how long a caller that found the batch busy at now waits before it asks again:
// until the holder's lease ends, plus a second for clocks that disagree a little, at least a
// second and at most limit (also when the store did not say when the lease ends).
func (c BatchClaim) BusyFor(now time.Time, limit time.Duration) time.Duration {
	if c.LeaseUntil.IsZero() {
		return limit
	}
	return min(max(time.Second, c.LeaseUntil.Sub(now)+time.Second), limit)
}

// PageLimit is the page size a store serves for a listing's limit (ListDeliveries, ListInbox):
// 100 for 0 or less, at most 1,000, so one request cannot pull a whole campaign at once.
func PageLimit(limit int) int {
	switch {
	case limit <= 0:
		return 100
	case limit > 1000:
		return 1000
	}
	return limit
}

// UserStore keeps devices, contacts and preferences.
type UserStore interface {
	// PutDevice creates or replaces the device (UserID, Token); a token registered to another
	// user moves to this one.
	PutDevice(ctx context.Context, d Device) error
	// DeleteDevice removes the user's device; ENOTFOUND if it is not registered to user.
	DeleteDevice(ctx context.Context, userID, token string) error
	// RemoveDeadDevice deletes the device with token unless it was registered again after
	// seenBefore (a fresh registration wins over an old failure). Reports whether it deleted.
	RemoveDeadDevice(ctx context.Context, token string, seenBefore time.Time) (bool, error)
	// ListDevices returns the devices of each user that has any.
	ListDevices(ctx context.Context, userIDs []string) (map[string][]Device, error)
	// PutContact creates or replaces a user's contact; stores encrypt it at rest.
	PutContact(ctx context.Context, c Contact) error
	// GetContacts returns the contact of each user that has one.
	GetContacts(ctx context.Context, userIDs []string) (map[string]Contact, error)
	// PutPreferences creates or replaces a user's preferences.
	PutPreferences(ctx context.Context, p Preferences) error
	// GetPreferences returns the stored preferences of each user that has them.
	GetPreferences(ctx context.Context, userIDs []string) (map[string]Preferences, error)
}

// SuppressionStore keeps addresses Herald must not send to.
type SuppressionStore interface {
	// Suppress adds or refreshes a suppression (idempotent).
	Suppress(ctx context.Context, s Suppression) error
	// Suppressed returns the suppressions among the given address keys.
	Suppressed(ctx context.Context, addressKeys []string) (map[string]Suppression, error)
	// ListSuppressions pages the suppressions matching f (an operator's export): limit is
	// 1–MaxSuppressionPage (EINVALID otherwise); a page may hold fewer than limit — even none —
	// while next is not "" (a DynamoDB scan bounds its work per call); entries come in an order
	// stable across calls, each once per listing; the cursor is opaque (EINVALID when the store
	// did not produce it).
	ListSuppressions(ctx context.Context, f SuppressionFilter, cursor string, limit int) (page []Suppression, next string, err error)
}

// SuppressionFilter selects suppressions; a zero field matches every one.
type SuppressionFilter struct {
	Channel  Channel
	Reason   string
	From, To time.Time // created in [From, To)
}

// MaxSuppressionPage is the most suppressions one ListSuppressions call returns.
const MaxSuppressionPage = 1000

// InboxStore keeps users' in-app inboxes: each user's own items (PutInboxItems, one per user)
// merged with the broadcasts that target them (PutBroadcast, one for a whole app audience: fan-out
// on read, docs/design.md §6). A broadcast a user can see — unexpired, notify.Broadcast.Reaches
// their devices and preferences as they are at the read, not deleted by them, and not shadowed by an
// own item with the same id — is an item of their inbox like any other in every method below.
// Reading it writes nothing; MarkRead, MarkAllRead and DeleteInboxItem write a per-user marker
// (read at, deleted) and nothing else. Expired items are invisible to every read.
type InboxStore interface {
	// PutInboxItems stores items; an existing (UserID, ID) is left as it is (idempotent). A
	// repeated put of an item carries its first CreatedAt (the notification's): stores may key
	// items by it, so the put of an id again under another time is not guaranteed to be seen
	// as the same item.
	PutInboxItems(ctx context.Context, items []InboxItem) error
	// PutBroadcast stores b once for every user it targets, with a number of writes that does not
	// depend on the audience. An existing b.ID is left as it is, with every user's marker
	// (idempotent). EINVALID if b.Validate fails.
	PutBroadcast(ctx context.Context, b Broadcast) error
	// WithdrawBroadcast hides broadcast id from every read at or after at (its campaign was
	// canceled), markers included. Idempotent; an unknown id is no error.
	WithdrawBroadcast(ctx context.Context, id string, at time.Time) error
	// ListInbox returns a user's items and visible broadcasts newest first (CompareInbox);
	// cursor "" starts, next "" means the end. An item or broadcast arriving between pages does
	// not shift the rest of a walk.
	ListInbox(ctx context.Context, userID, cursor string, limit int, now time.Time) (items []InboxItem, next string, err error)
	// UnreadCount counts unexpired unread items and visible broadcasts the user has not read.
	UnreadCount(ctx context.Context, userID string, now time.Time) (int, error)
	// MarkRead marks one item read (idempotent: the first ReadAt stays); for a broadcast it writes
	// the user's read marker. ENOTFOUND if the user has no such item and no such visible
	// broadcast at `at`.
	MarkRead(ctx context.Context, userID, id string, at time.Time) error
	// MarkAllRead marks every unread item and every unread visible broadcast read and returns how
	// many changed.
	MarkAllRead(ctx context.Context, userID string, at time.Time) (int, error)
	// DeleteInboxItem removes one item; a broadcast is hidden from this user only (a deleted
	// marker), for good. ENOTFOUND if the user has no such item and no such visible broadcast.
	// A broadcast's visibility here is judged at the store's clock.
	DeleteInboxItem(ctx context.Context, userID, id string) error
}

// OutMessage is a message to enqueue.
type OutMessage struct {
	Body       []byte
	Delay      time.Duration     // invisible until now+Delay (≤ 15 min, as SQS)
	GroupID    string            // fair-queue tenant key: the service
	Attributes map[string]string // small string metadata (e.g. "kind")
}

// Message is a received message.
type Message struct {
	ID            string
	ReceiptHandle string // valid until the message is received again
	Body          []byte
	ReceiveCount  int
	GroupID       string
	Attributes    map[string]string
	SentAt        time.Time
}

// QueueStats are approximate counts, as SQS reports them.
type QueueStats struct {
	Visible  int `json:"visible"`
	InFlight int `json:"in_flight"`
	Delayed  int `json:"delayed"`
	// OldestAgeSeconds is how long ago the oldest message still in the queue (visible, in
	// flight or delayed) was sent; nil when the queue is empty or the backend does not say
	// (SQS reports it only as the CloudWatch metric ApproximateAgeOfOldestMessage, which the
	// alarms watch).
	OldestAgeSeconds *int64 `json:"oldest_age_seconds,omitempty"`
}

// Producer enqueues messages. It is all a stage needs of a queue.
type Producer interface {
	// Send enqueues msgs on queue, all or an error naming what failed; ENOTFOUND for an unknown
	// queue, ETOOLARGE for a body over the limit.
	Send(ctx context.Context, queue string, msgs ...OutMessage) error
}

// MaxQueueDelay is the longest a message may be delayed on a queue: SQS's DelaySeconds cap (900
// seconds), which the local queue keeps too. A longer wait (a night of quiet hours, a verdict
// check's backoff) is several hops, each at most this.
const MaxQueueDelay = 15 * time.Minute

// Queue is a durable queue with SQS semantics: at-least-once, visibility timeout, receive
// count, per-message delay, and a dead-letter queue after MaxReceiveCount receives. Adapters pass
// internal/notify/queuetest.
type Queue interface {
	Producer
	// Receive returns up to max (≤ 10) visible messages, making them invisible for visibility
	// and incrementing their receive count; a message received more than its queue's
	// MaxReceiveCount times moves to the DLQ instead. It waits up to wait for one to appear.
	Receive(ctx context.Context, queue string, max int, visibility, wait time.Duration) ([]Message, error)
	// Delete removes a received message. A stale receipt (the message was received again since)
	// returns ECONFLICT and deletes nothing.
	Delete(ctx context.Context, queue, receiptHandle string) error
	// ChangeVisibility makes a received message visible again after d (0: now). Stale receipt:
	// ECONFLICT.
	ChangeVisibility(ctx context.Context, queue, receiptHandle string, d time.Duration) error
	// Peek lists up to max messages without receiving them (for DLQ inspection).
	Peek(ctx context.Context, queue string, max int) ([]Message, error)
	// Redrive moves every message in dlq back to its source queue with receive count reset, and
	// returns how many moved.
	Redrive(ctx context.Context, dlq string) (int, error)
	// Stats returns approximate counts.
	Stats(ctx context.Context, queue string) (QueueStats, error)
}

// Message states a QueueBrowser lists, as QueueStats counts them.
const (
	MessageVisible  = "visible"   // waiting to be received
	MessageInFlight = "in_flight" // received, not yet deleted: being worked on or backing off
	MessageDelayed  = "delayed"   // sent with a delay, never received yet
)

// QueueBrowser lists a queue's messages in one state without receiving them, paged (the local
// queue; SQS can only show a message by receiving it, which would take it from its consumers,
// so the AWS runtime shows counts only). Pages come oldest first; after is the previous page's
// next ("" for the first); next "" ends the listing. EINVALID for an unknown state.
type QueueBrowser interface {
	Browse(ctx context.Context, queue, state, after string, limit int) (page []Message, next string, err error)
}

// Consumers pauses and resumes what consumes a queue — the local runtime's workers, an event
// source mapping's Enabled flag in AWS — for an operator who must stop a stage (a provider
// outage, a bad deploy) without losing its messages: they wait on the queue until it resumes.
type Consumers interface {
	// SetPaused pauses (true) or resumes (false) queue's consumers; ENOTFOUND when nothing
	// consumes queue here.
	SetPaused(ctx context.Context, queue string, paused bool) error
	// Paused reports whether queue's consumers are paused; ENOTFOUND as for SetPaused.
	Paused(ctx context.Context, queue string) (bool, error)
}

// DeadLetters acts on one dead letter at a time, for an operator who redrives or drops a single
// message of a DLQ (the console). Both queue adapters implement it, checked by queuetest.
type DeadLetters interface {
	// RedriveDeadLetter moves message id of dlq back to the queue it dead-lettered from — the
	// queue using dlq as its DLQ — with its receive count reset (the moved message may get a new
	// ID). ENOTFOUND when dlq holds no such message, or it is received at the moment.
	RedriveDeadLetter(ctx context.Context, dlq, id string) error
	// DeleteDeadLetter removes message id from dlq; ENOTFOUND as for RedriveDeadLetter.
	DeleteDeadLetter(ctx context.Context, dlq, id string) error
	// PurgeDeadLetters removes every message of dlq and returns how many it held (SQS: its
	// approximate count just before PurgeQueue, which SQS finishes within a minute and allows
	// once a minute: ECONFLICT while one is under way). ENOTFOUND for an unknown queue.
	PurgeDeadLetters(ctx context.Context, dlq string) (int, error)
}

// QueueConfig declares a queue.
type QueueConfig struct {
	Name              string
	VisibilityTimeout time.Duration // default for Receive when 0 is passed
	MaxReceiveCount   int           // after this many receives the message moves to DLQ
	DLQ               string        // "" for a DLQ itself
}

// OutboundMessage is one message handed to a Sender: the resolved content and one address.
type OutboundMessage struct {
	DeliveryID     string
	NotificationID string
	Channel        Channel
	Address        string
	App            string
	Environment    string // APNs: "sandbox" or "production"
	Category       Category
	Content        Content
	CollapseID     string
	Priority       Priority
	TTL            time.Duration
	// Attempt is this send's attempt of the delivery, 1 the first. A later one may follow an
	// attempt whose outcome is unknown: a sender whose provider does not dedupe looks the
	// delivery up first (AlimTalk), from Since, when the notification was made.
	Attempt int
	Since   time.Time
	// Unsubscribe is the one-click unsubscribe URL of a marketing email to a known user (RFC 8058:
	// the sender puts it in List-Unsubscribe with List-Unsubscribe-Post); "" for every other message.
	Unsubscribe string
	// OptOutLine is the free refusal line a marketing SMS ends with (marketing.opt_out_sms, e.g.
	// "무료수신거부 080-…", Korean 정보통신망법 §50); the sender keeps it whole. "" for every other message.
	OptOutLine string
}

// SendResult is a provider's answer for one OutboundMessage.
type SendResult struct {
	DeliveryID        string
	ProviderMessageID string
	// Err is nil when accepted; otherwise an *Error whose code says what to do: EDEADADDRESS,
	// EREJECTED, ESUPPRESSED (permanent), ETHROTTLED, EUNAVAILABLE (retry, RetryAfter honoured).
	Err error
	// VerdictPending is set with a nil Err when the provider accepted the message but reports its
	// final verdict later (AlimTalk: Kakao's answer reaches Solapi after the send): the delivery
	// is not done until a VerdictChecker reports it.
	VerdictPending bool
}

// Sender delivers messages through one provider. Implementations are safe for concurrent use.
type Sender interface {
	Provider() Provider
	// MaxBatch is the most messages one Send call takes (FCM 500).
	MaxBatch() int
	// Send delivers msgs (all of one provider app) and returns one result per message in the same
	// order. A non-nil error means the whole call failed the same way for every message.
	Send(ctx context.Context, msgs []OutboundMessage) ([]SendResult, error)
}

// SelfLimiting is a Sender that waits on the RateLimiter itself, with keys finer than the
// pipeline's provider:app (Web Push: one per push service origin, since one app's subscriptions
// span every browser vendor's service). The pipeline hands it its limiter when it is built.
type SelfLimiting interface {
	SetRateLimiter(RateLimiter)
}

// RateLimiter keeps every concurrent worker inside a provider account's quota.
type RateLimiter interface {
	// Wait blocks until n units for key may be used, or returns ctx's error. n larger than the
	// burst is allowed and waits proportionally.
	Wait(ctx context.Context, key string, n int) error
}

// Clock is time, replaceable in tests.
type Clock interface {
	Now() time.Time
}

// SystemClock is the real clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// Cipher seals contact data at rest. Stores that keep contacts are given one.
type Cipher interface {
	Seal(plaintext []byte) ([]byte, error)
	Open(sealed []byte) ([]byte, error)
}

// Scheduler arms one-time fires of reserved sends (EventBridge Scheduler in AWS, a durable loop
// locally). A fire puts FireMessage{Fire: id, At: ReservedTime(at)} on queue; the stored
// notification or campaign stays the truth (JudgeFire).
type Scheduler interface {
	// Schedule arms a one-time fire of id at `at` onto queue, replacing any earlier one for id:
	// arming the same id and time again changes nothing, which makes re-arming from the tables
	// idempotent.
	Schedule(ctx context.Context, id, queue string, at time.Time) error
	// Unschedule disarms id's fire; no error if there is none.
	Unschedule(ctx context.Context, id string) error
}

// Metrics records counters for dashboards and alarms: CloudWatch (embedded metric format) in
// AWS; the local runtime keeps none. Add never fails the caller.
type Metrics interface {
	// Add adds value to the counter name with the given dimensions (e.g. Provider=fcm).
	Add(ctx context.Context, name string, value int, dims map[string]string)
}

type eventualReadsKey struct{}

// WithEventualReads marks ctx's reads of users (devices, contacts, preferences) as allowed to
// be eventually consistent: about a second behind, at half the read cost in DynamoDB. The bulk
// lane reads this way — a campaign's member whose device was registered a moment ago is one of
// many — while a realtime send reads strongly, so the device registered just before a login
// code gets it. Stores that read consistently anyway ignore it.
func WithEventualReads(ctx context.Context) context.Context {
	return context.WithValue(ctx, eventualReadsKey{}, true)
}

// EventualReads reports whether WithEventualReads marked ctx.
func EventualReads(ctx context.Context) bool {
	v, _ := ctx.Value(eventualReadsKey{}).(bool)
	return v
}
