package notify

import (
	"context"
	"encoding/json"
	"slices"
	"time"
)

// Express is the state of a notification sent on the express path (docs/design.md §3): a
// small realtime notification whose few deliveries — and the counts they make — are kept in the
// notification's own record instead of one delivery record and counter update each. Ingest
// resolves the recipients before it stores the notification, so the create that dedupes the
// request also claims the deliveries (SENDING under a lease); the send's verdicts and the final
// status are then one more write. Anything that needs the stage queues — a retry, a worker that
// died mid-send — first hands the deliveries over to the delivery records (HandOverExpress),
// after which the notification is an ordinary one.
type Express struct {
	// Deliveries hold masked addresses only, like the delivery records. Their counts are not
	// kept beside them: Counts derives them.
	Deliveries []Delivery
	// Lease is how long the SENDING deliveries are their sender's (claimed together).
	Lease time.Time
	// Verdicts, when set, names the batch this notification's verdicts are recorded with,
	// together with those of the other express notifications of its ingest invocation
	// (ExpressStore.CompleteExpressBatch): a store may keep them in one record of their own and
	// apply them whenever it reads the notification (ResolveVerdicts).
	Verdicts string
}

// expressDoc is Express as stores keep it: short keys, since a DynamoDB write is billed per KB
// of the whole item.
type expressDoc struct {
	D []expressDelivery `json:"d"`
	L int64             `json:"l,omitempty"` // lease, unix ms
	V string            `json:"v,omitempty"` // Verdicts
}

type expressDelivery struct {
	ID       string         `json:"i"`
	User     string         `json:"u,omitempty"`
	Channel  Channel        `json:"c"`
	Provider Provider       `json:"p"`
	App      string         `json:"a,omitempty"`
	Masked   string         `json:"m,omitempty"`
	Status   DeliveryStatus `json:"s"`
	Reason   string         `json:"r,omitempty"`
	Detail   string         `json:"x,omitempty"`
	Attempts int            `json:"n,omitempty"`
	MsgID    string         `json:"pm,omitempty"`
	At       int64          `json:"t,omitempty"` // updated, unix ms
}

// MarshalJSON encodes x compactly (expressDoc).
func (x Express) MarshalJSON() ([]byte, error) {
	doc := expressDoc{D: make([]expressDelivery, len(x.Deliveries)), V: x.Verdicts}
	if !x.Lease.IsZero() {
		doc.L = x.Lease.UnixMilli()
	}
	for i, d := range x.Deliveries {
		doc.D[i] = expressDelivery{ID: d.ID, User: d.UserID, Channel: d.Channel, Provider: d.Provider, App: d.App,
			Masked: d.AddressMasked, Status: d.Status, Reason: d.Reason, Detail: d.Detail, Attempts: d.Attempts,
			MsgID: d.ProviderMessageID}
		if !d.UpdatedAt.IsZero() {
			doc.D[i].At = d.UpdatedAt.UnixMilli()
		}
	}
	return json.Marshal(doc)
}

// UnmarshalJSON decodes what MarshalJSON wrote.
func (x *Express) UnmarshalJSON(b []byte) error {
	var doc expressDoc
	if err := json.Unmarshal(b, &doc); err != nil {
		return err
	}
	*x = Express{Deliveries: make([]Delivery, len(doc.D)), Verdicts: doc.V}
	if doc.L != 0 {
		x.Lease = time.UnixMilli(doc.L).UTC()
	}
	for i, d := range doc.D {
		x.Deliveries[i] = Delivery{ID: d.ID, UserID: d.User, Channel: d.Channel, Provider: d.Provider, App: d.App,
			AddressMasked: d.Masked, Status: d.Status, Reason: d.Reason, Detail: d.Detail, Attempts: d.Attempts,
			ProviderMessageID: d.MsgID}
		if d.At != 0 {
			x.Deliveries[i].UpdatedAt = time.UnixMilli(d.At).UTC()
		}
		if d.Status == DeliverySending {
			x.Deliveries[i].LeaseUntil = x.Lease
		}
	}
	return nil
}

// ExpressMaxDeliveries bounds what is kept in a notification's record (items stay far from
// DynamoDB's 400 KB limit, and small enough that each write costs one or two write units).
const ExpressMaxDeliveries = 8

// Pending reports whether any delivery is still to be decided (PENDING or SENDING).
func (x *Express) Pending() bool {
	for _, d := range x.Deliveries {
		if !d.Status.Terminal() {
			return true
		}
	}
	return false
}

// Counts are the deliveries' counts as CountDelivery keeps them (by-reason keys included):
// every delivery in Total, each ended one in its outcome. GetNotification adds them to the
// notification's Stats; HandOverExpress moves them into its counters.
func (x *Express) Counts() map[Channel]ChannelStats {
	out := map[Channel]ChannelStats{}
	for _, d := range x.Deliveries {
		CountDelivery(out, d.Channel, d.Status, d.Reason, true)
	}
	return out
}

// Apply applies verdicts to the deliveries that are SENDING and returns how many were applied;
// a PENDING verdict releases the delivery (its lease cleared) for a retry. It is what stores do
// inside CompleteExpress and HandOverExpress.
func (x *Express) Apply(updates []DeliveryUpdate) int {
	n := 0
	for _, u := range updates {
		i := slices.IndexFunc(x.Deliveries, func(d Delivery) bool { return d.ID == u.ID })
		if i < 0 || x.Deliveries[i].Status != DeliverySending {
			continue
		}
		d := &x.Deliveries[i]
		d.Status, d.Reason, d.Detail, d.UpdatedAt = u.Status, u.Reason, u.Detail, u.At.UTC()
		if u.ProviderMessageID != "" {
			d.ProviderMessageID = u.ProviderMessageID
		}
		d.LeaseUntil = time.Time{}
		n++
	}
	return n
}

// Release turns the deliveries left SENDING (a worker that died mid-send) into PENDING, for the
// stage queues to send again.
func (x *Express) Release() {
	for i := range x.Deliveries {
		if x.Deliveries[i].Status == DeliverySending {
			x.Deliveries[i].Status = DeliveryPending
			x.Deliveries[i].LeaseUntil = time.Time{}
		}
	}
	x.Lease = time.Time{}
}

// ExpressStore keeps express notifications. CreateNotification stores n.Express (and n's few
// Recipients) in the notification's own record when it is set; GetNotification returns it and
// adds its Counts to Stats; ListDeliveries lists its deliveries while they are held there.
type ExpressStore interface {
	// CompleteExpress applies updates to id's express deliveries (Express.Apply) and, when none
	// is left PENDING or SENDING and the status is still PROCESSING, sets the final status from
	// the resulting counts — one write, none when there is nothing to change (so with no updates
	// it only finishes a notification whose work was all done at creation, its inbox items). It
	// returns how many updates applied. ENOTFOUND; EINVALID when id is not (or no longer) express.
	CompleteExpress(ctx context.Context, id string, updates []DeliveryUpdate) (int, error)
	// HandOverExpress applies updates, releases what is left SENDING (Express.Release), and moves
	// the express deliveries into delivery records and their counts into the notification's
	// counters, as one step; the notification is no longer express. With reprepare set, chunk 0
	// counts as not prepared, so prepare runs it again (and finds the moved deliveries; their
	// PENDING ones are pending). A notification no longer express is a no-op. ENOTFOUND.
	HandOverExpress(ctx context.Context, id string, updates []DeliveryUpdate, reprepare bool) error
	// CompleteExpressBatch records the verdicts of express notifications whose Verdicts is
	// batch, all at once: once it returns nil, every read of each is as if CompleteExpress(ID,
	// Updates) had run for it (with no updates: a notification whose work was all done at
	// creation is finished). It is written once per batch: what it does not name stays as it
	// is. A store may keep the batch in a record of its own — one write for all of them — and
	// apply it on every read, or apply it to each notification.
	CompleteExpressBatch(ctx context.Context, batch string, done []ExpressDone) error
}

// ExpressDone is one notification's verdicts in CompleteExpressBatch.
type ExpressDone struct {
	ID      string
	Updates []DeliveryUpdate
}

// ResolveVerdicts applies to x, stored with status, the verdicts recorded for id in its batch
// (updates, as CompleteExpressBatch received them) and returns the status they give: what
// CompleteExpress would have left.
func (x *Express) ResolveVerdicts(status NotificationStatus, updates []DeliveryUpdate) NotificationStatus {
	x.Apply(updates)
	if !x.Pending() && status == StatusProcessing {
		return x.FinalStatus()
	}
	return status
}

// Page returns the deliveries after id `after` in ID order, at most limit, and whether more
// follow: what ListDeliveries serves while the deliveries are held in the notification.
func (x *Express) Page(after string, limit int) (ds []Delivery, more bool) {
	all := slices.Clone(x.Deliveries)
	slices.SortFunc(all, func(a, b Delivery) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	for _, d := range all {
		if d.ID <= after {
			continue
		}
		if len(ds) == limit {
			return ds, true
		}
		ds = append(ds, d)
	}
	return ds, false
}

// MergeCounts adds counts — kept as CountDelivery keeps them, by-reason keys included — to a
// store's raw per-channel counters (before Stats.SplitReasons), allocating channels if nil.
func MergeCounts(channels, counts map[Channel]ChannelStats) map[Channel]ChannelStats {
	if len(counts) == 0 {
		return channels
	}
	if channels == nil {
		channels = make(map[Channel]ChannelStats, len(counts))
	}
	for ch, c := range counts {
		cs := channels[ch]
		cs.Total += c.Total
		cs.Sent += c.Sent
		cs.Failed += c.Failed
		cs.Skipped += c.Skipped
		channels[ch] = cs
	}
	return channels
}

// Clone returns a deep copy of x.
func (x *Express) Clone() *Express {
	if x == nil {
		return nil
	}
	c := &Express{Deliveries: slices.Clone(x.Deliveries), Lease: x.Lease, Verdicts: x.Verdicts}
	return c
}

// ExpressView is how a store returns an express notification it just created: its Stats
// include the express counts, split by reason, as GetNotification would read them.
func ExpressView(n *Notification) *Notification {
	c := *n
	c.Express = n.Express.Clone()
	c.Stats.Channels = MergeCounts(MergeCounts(nil, n.Stats.Channels), c.Express.Counts())
	c.Stats.SplitReasons()
	return &c
}

// FinalStatus is the end state x's counts imply (Stats.FinalStatus). While a notification is
// express its counts are all in x: no delivery record or counter of its own exists yet.
func (x *Express) FinalStatus() NotificationStatus {
	st := Stats{Channels: MergeCounts(nil, x.Counts())}
	st.SplitReasons()
	return st.FinalStatus()
}

// AddCounts adds counts kept as CountDelivery keeps them (by-reason keys included) to stats
// already split by SplitReasons.
func (s *Stats) AddCounts(counts map[Channel]ChannelStats) {
	o := Stats{Channels: MergeCounts(nil, counts)}
	o.SplitReasons()
	s.Channels = MergeCounts(s.Channels, o.Channels)
	s.MembersPrepared += o.MembersPrepared
	for r, k := range o.SkippedByReason {
		if s.SkippedByReason == nil {
			s.SkippedByReason = map[string]int{}
		}
		s.SkippedByReason[r] += k
	}
	for r, k := range o.FailedByReason {
		if s.FailedByReason == nil {
			s.FailedByReason = map[string]int{}
		}
		s.FailedByReason[r] += k
	}
}
