package ddb

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/guregu/dynamo/v2"
	"github.com/guregu/dynamo/v2/dynamodbiface"
	"golang.org/x/sync/errgroup"

	"herald/internal/notify"
)

// Store is notify.Store on DynamoDB. It is safe for concurrent use; the package documentation
// describes the tables it needs.
type Store struct {
	db     *dynamo.DB
	client dynamodbiface.DynamoDBAPI // for the request fields guregu/dynamo does not expose
	tables Tables
	cipher notify.Cipher
	clock  notify.Clock

	// txBudget is the most bytes CreateNotification puts into its one transaction before it
	// writes recipient chunks ahead of it instead; a field so tests can force that path.
	txBudget int

	// recipientIndex files each notification under its one user (KeepRecipientIndex).
	recipientIndex bool
}

// KeepRecipientIndex makes the store file each notification it creates under the one user it is
// sent to (notify.IndexedUser), in the notifications table's by_user index, so an operator can
// list a user's notifications (NotificationFilter.User). It costs one write unit more per such
// notification — the index's copy of its keys — which is why a deployment chooses it
// (stack.recipient_index). Without it, a listing by user answers notify.ErrNoRecipientIndex.
func (s *Store) KeepRecipientIndex() *Store {
	s.recipientIndex = true
	return s
}

// indexedUser is the ruser attribute of n's main item.
func (s *Store) indexedUser(n *notify.Notification) string {
	if !s.recipientIndex {
		return ""
	}
	return notify.IndexedUser(n)
}

var _ notify.Store = (*Store)(nil)

// Tuning constants. deliveryShards is part of the table design (changing it on live tables
// hides deliveries from listings), so these are constants, not options.
const (
	statsShards       = 16                  // most counter items per notification (see the package doc)
	deliveryShards    = 16                  // by_notification partitions per notification
	txMaxItems        = 100                 // TransactWriteItems limit
	txMaxBytes        = 4 << 20             // TransactWriteItems aggregate size limit
	batchGetMax       = 100                 // BatchGetItem limit
	parallelism       = 16                  // concurrent single-item requests per call
	txAttempts        = 12                  // tries of one transaction against conflicts/throttling
	deliveryRetention = 30 * 24 * time.Hour // deliveries and chunk markers expire (TTL) after this
)

// New returns a Store on the tables named by tables, which must exist (CreateTables, or the CDK
// app). cipher seals contacts at rest and is required; clock defaults to the system clock and
// is read only where the port passes no time (defaults such as UpdatedAt, TTLs).
func New(db *dynamo.DB, tables Tables, cipher notify.Cipher, clock notify.Clock) (*Store, error) {
	if db == nil {
		return nil, errors.New("ddb: new store: nil dynamo.DB")
	}
	if cipher == nil {
		return nil, errors.New("ddb: new store: a cipher is required to keep contacts encrypted at rest")
	}
	if err := tables.validate(); err != nil {
		return nil, fmt.Errorf("ddb: new store: %w", err)
	}
	if clock == nil {
		clock = notify.SystemClock{}
	}
	return &Store{db: db, client: db.Client(), tables: tables, cipher: cipher, clock: clock,
		txBudget: txMaxBytes - 256<<10}, nil
}

// now is the store's clock in UTC.
func (s *Store) now() time.Time { return s.clock.Now().UTC() }

// nowOr returns t in UTC, or the store's current time when t is zero.
func (s *Store) nowOr(t time.Time) time.Time {
	if t.IsZero() {
		return s.now()
	}
	return t.UTC()
}

// ---- errors ----

// wrapErr gives err its notify code (unless it already carries one) and the operation's context:
// "ddb: claim deliveries: unavailable: …".
func wrapErr(op string, err error) error {
	if err == nil {
		return nil
	}
	var ne *notify.Error
	if errors.As(err, &ne) {
		return fmt.Errorf("ddb: %s: %w", op, err)
	}
	code, msg := classify(err)
	return fmt.Errorf("ddb: %s: %w", op, notify.Wrap(code, err, "%s", msg))
}

// classify maps a DynamoDB or SDK error to a notify code and a caller-safe message.
func classify(err error) (code, msg string) {
	if errors.Is(err, dynamo.ErrNotFound) {
		return notify.ENOTFOUND, "not found"
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return notify.EUNAVAILABLE, "dynamodb request canceled or timed out"
	}
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) {
		code, msg = notify.EINTERNAL, "dynamodb transaction canceled"
		for _, r := range tce.CancellationReasons {
			switch aws.ToString(r.Code) {
			case "ConditionalCheckFailed":
				return notify.ECONFLICT, "a conditional write lost"
			case "ThrottlingError", "ProvisionedThroughputExceeded", "TransactionConflict", "RequestLimitExceeded":
				code, msg = notify.EUNAVAILABLE, "dynamodb throttled or contended"
			case "ItemCollectionSizeLimitExceeded":
				return notify.ETOOLARGE, "item collection too large"
			case "ValidationError":
				return notify.EINVALID, "dynamodb rejected the request"
			}
		}
		return code, msg
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "ConditionalCheckFailedException":
			return notify.ECONFLICT, "a conditional write lost"
		case "ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded",
			"LimitExceededException", "TransactionConflictException", "TransactionInProgressException",
			"InternalServerError", "ServiceUnavailable", "ServiceUnavailableException":
			return notify.EUNAVAILABLE, "dynamodb throttled or unavailable"
		case "ItemCollectionSizeLimitExceededException":
			return notify.ETOOLARGE, "item collection too large"
		case "ResourceNotFoundException":
			return notify.EINTERNAL, "dynamodb table not found"
		case "ValidationException":
			if strings.Contains(strings.ToLower(ae.ErrorMessage()), "size") {
				return notify.ETOOLARGE, "item too large"
			}
			return notify.EINVALID, "dynamodb rejected the request"
		}
		if ae.ErrorFault() == smithy.FaultServer {
			return notify.EUNAVAILABLE, "dynamodb server error"
		}
		return notify.EINTERNAL, "dynamodb error"
	}
	var netErr net.Error
	var opErr *smithy.OperationError
	if errors.As(err, &netErr) || errors.As(err, &opErr) {
		// An operation error without an API error is the transport: connection refused, reset…
		return notify.EUNAVAILABLE, "dynamodb unreachable"
	}
	return notify.EINTERNAL, "dynamodb store error"
}

// retryableAPI reports whether a request that failed with err may simply be sent again.
func retryableAPI(err error) bool {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return false
	}
	switch ae.ErrorCode() {
	case "TransactionConflictException", "TransactionInProgressException", "ProvisionedThroughputExceededException",
		"ThrottlingException", "RequestLimitExceeded":
		return true
	}
	return false
}

// cancelReasons returns the per-item reasons of a canceled transaction.
func cancelReasons(err error) ([]types.CancellationReason, bool) {
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		return nil, false
	}
	return tce.CancellationReasons, true
}

// reasonCode is a cancellation reason's code; "None" for an item that did not cause it.
func reasonCode(reasons []types.CancellationReason, i int) string {
	if i >= len(reasons) {
		return "None"
	}
	if c := aws.ToString(reasons[i].Code); c != "" {
		return c
	}
	return "None"
}

// transient reports whether a cancellation reason is worth retrying as is.
func transient(code string) bool {
	switch code {
	case "TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded", "RequestLimitExceeded":
		return true
	}
	return false
}

// worthRetry reports whether a failed transaction is worth sending again unchanged.
func worthRetry(err error, reasons []types.CancellationReason, canceled bool) bool {
	if !canceled {
		return retryableAPI(err)
	}
	retry := false
	for i := range reasons {
		code := reasonCode(reasons, i)
		if transient(code) {
			retry = true
		} else if code != "None" {
			return false
		}
	}
	return retry
}

// pause sleeps before try attempt+1 of a contended write: jittered exponential from 10 ms, capped
// at 1 s.
func pause(ctx context.Context, attempt int) error {
	d := notify.Backoff(attempt+1, 10*time.Millisecond, time.Second, 0)
	d = d/2 + rand.N(d/2+1)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// ---- requests ----

// transact runs one TransactWriteItems with a fresh idempotency token, so the SDK's own retries
// of a request whose answer was lost cannot apply it twice.
func (s *Store) transact(ctx context.Context, items []types.TransactWriteItem) error {
	_, err := s.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
		TransactItems:      items,
		ClientRequestToken: aws.String(randomToken()),
	})
	return err
}

// updateItem runs one UpdateItem, retrying transaction conflicts (an UpdateItem on an item that a
// transaction is writing fails with TransactionConflictException) and throttling.
func (s *Store) updateItem(ctx context.Context, in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
	return retried(ctx, func() (*dynamodb.UpdateItemOutput, error) { return s.client.UpdateItem(ctx, in) })
}

// putItem is updateItem for one PutItem.
func (s *Store) putItem(ctx context.Context, in *dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) {
	return retried(ctx, func() (*dynamodb.PutItemOutput, error) { return s.client.PutItem(ctx, in) })
}

// retried runs call again after a transaction conflict or throttling, up to txAttempts times.
func retried[T any](ctx context.Context, call func() (T, error)) (T, error) {
	for attempt := 0; ; attempt++ {
		out, err := call()
		if err == nil || !retryableAPI(err) || attempt+1 >= txAttempts {
			return out, err
		}
		if err := pause(ctx, attempt); err != nil {
			var zero T
			return zero, err
		}
	}
}

// condFailedItem reports whether err is a failed condition, and the item as it was when the
// condition failed (nil if it did not exist), when the request asked for ALL_OLD.
func condFailedItem(err error) (map[string]types.AttributeValue, bool) {
	var cf *types.ConditionalCheckFailedException
	if errors.As(err, &cf) {
		return cf.Item, true
	}
	return nil, false
}

// ---- expressions ----

// expr builds expressions with placeholders for every name and value, so no attribute name can
// collide with DynamoDB's reserved words.
type expr struct {
	names  map[string]string
	values map[string]types.AttributeValue
}

func newExpr() *expr {
	return &expr{names: map[string]string{}, values: map[string]types.AttributeValue{}}
}

// n returns the placeholder for attribute name.
func (e *expr) n(name string) string {
	for k, v := range e.names {
		if v == name {
			return k
		}
	}
	k := "#n" + strconv.Itoa(len(e.names))
	e.names[k] = name
	return k
}

// v returns a placeholder for value.
func (e *expr) v(value types.AttributeValue) string {
	k := ":v" + strconv.Itoa(len(e.values))
	e.values[k] = value
	return k
}

func (e *expr) s(value string) string { return e.v(&types.AttributeValueMemberS{Value: value}) }
func (e *expr) i(value int64) string {
	return e.v(&types.AttributeValueMemberN{Value: strconv.FormatInt(value, 10)})
}

// nameMap and valueMap return nil for empty maps, which DynamoDB rejects.
func (e *expr) nameMap() map[string]string {
	if len(e.names) == 0 {
		return nil
	}
	return e.names
}

func (e *expr) valueMap() map[string]types.AttributeValue {
	if len(e.values) == 0 {
		return nil
	}
	return e.values
}

// updateExpr joins SET, ADD and REMOVE clauses.
func updateExpr(set, add, remove []string) string {
	var parts []string
	if len(set) > 0 {
		parts = append(parts, "SET "+strings.Join(set, ", "))
	}
	if len(add) > 0 {
		parts = append(parts, "ADD "+strings.Join(add, ", "))
	}
	if len(remove) > 0 {
		parts = append(parts, "REMOVE "+strings.Join(remove, ", "))
	}
	return strings.Join(parts, " ")
}

func strAttr(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

// key2 is a pk/sk key.
func key2(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrPK: strAttr(pk), attrSK: strAttr(sk)}
}

// ---- small helpers ----

// nanos is how times are stored: UTC unix nanoseconds, 0 for the zero time.
func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// timeOf reverses nanos.
func timeOf(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

func nanosPtr(t *time.Time) *int64 {
	if t == nil {
		return nil
	}
	n := t.UnixNano()
	return &n
}

func timePtr(n *int64) *time.Time {
	if n == nil {
		return nil
	}
	t := time.Unix(0, *n).UTC()
	return &t
}

// ttlOf is a DynamoDB TTL value: epoch seconds, rounded up so an item never expires early.
func ttlOf(t time.Time) int64 {
	s := t.Unix()
	if t.Nanosecond() > 0 {
		s++
	}
	return s
}

// shardOf picks one of n shards for key, stably.
func shardOf(key string, n int) int {
	h := fnv.New32a()
	h.Write([]byte(key))
	return int(h.Sum32() % uint32(n))
}

func randomToken() string {
	var b [16]byte
	_, _ = crand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// batchesOf splits xs into slices of at most n.
func batchesOf[T any](xs []T, n int) [][]T {
	var out [][]T
	for len(xs) > n {
		out = append(out, xs[:n:n])
		xs = xs[n:]
	}
	if len(xs) > 0 {
		out = append(out, xs)
	}
	return out
}

// unique returns xs without repeats, in first-seen order.
func unique(xs []string) []string {
	seen := make(map[string]struct{}, len(xs))
	out := make([]string, 0, len(xs))
	for _, x := range xs {
		if _, ok := seen[x]; !ok {
			seen[x] = struct{}{}
			out = append(out, x)
		}
	}
	return out
}

// forEach calls fn(i) for i in [0, n) with at most parallelism calls at once; the first error
// cancels the rest.
func forEach(ctx context.Context, n int, fn func(ctx context.Context, i int) error) error {
	if n == 1 {
		return fn(ctx, 0)
	}
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(parallelism)
	for i := range n {
		g.Go(func() error { return fn(ctx, i) })
	}
	return g.Wait()
}
