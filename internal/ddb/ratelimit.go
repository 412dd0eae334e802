package ddb

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"herald/internal/awserr"
	"herald/internal/notify"
	"herald/internal/ratelimit"
)

// MinRateWindow is the shortest window the RateLimiter counts in. A window normally lasts
// Burst/PerSecond (so at most Burst units go at once, as with ratelimit.Limiter); a smaller burst
// would mean a DynamoDB write per few units, so the window is stretched to this length and its
// allowance to PerSecond × window — the same sustained rate with a larger burst.
const MinRateWindow = 100 * time.Millisecond

// rateItemTTL is how long a window's item outlives the window before TTL may delete it.
const rateItemTTL = time.Minute

// RateLimiter is the AWS runtime's notify.RateLimiter: a token bucket per key kept in DynamoDB,
// shared by every concurrent Lambda, with ratelimit.Limiter's contract (rates by longest key
// prefix, keys without one unlimited, n above the burst waits proportionally).
//
// Time is cut into fixed windows of Burst/PerSecond (at least MinRateWindow), each allowing
// Burst units. One item per key and window counts the units taken, raised by a conditional
// UpdateItem `ADD used :n` that fails when the window would go over; a caller that finds its
// window full (or only partly free: it takes what is left) sleeps until the next window, plus
// jitter so contending callers spread out. A request larger than a window's allowance takes it
// window by window. Over any interval D at most PerSecond×D + 2×Burst units pass (the boundary
// of two windows can pass a burst each), plus whatever hosts whose clocks lag by a window add.
//
// Cost: one write per successful take plus one per contended attempt — about (callers per
// window + 1) writes per window per busy key, e.g. 10 windows/s × a few callers; items expire by
// TTL.
type RateLimiter struct {
	client *dynamodb.Client
	table  string
	rates  map[string]ratelimit.Rate
	clock  notify.Clock

	mu    sync.Mutex
	specs map[string]*windowSpec // key → its windows; nil: unlimited
	full  map[string]int64       // key → a window index seen full, so other waiters here skip the write
}

var _ notify.RateLimiter = (*RateLimiter)(nil)

// windowSpec is how one key's time is cut: windows of size, each allowing allowance units.
type windowSpec struct {
	size      time.Duration
	allowance int
}

// NewRateLimiter returns a limiter keeping its buckets in table (see CreateRateLimitTable); clock
// nil means the system clock. Every process sharing a quota must use the same rates.
func NewRateLimiter(client *dynamodb.Client, table string, rates map[string]ratelimit.Rate, clock notify.Clock) *RateLimiter {
	if clock == nil {
		clock = notify.SystemClock{}
	}
	return &RateLimiter{client: client, table: table, rates: rates, clock: clock, specs: map[string]*windowSpec{}, full: map[string]int64{}}
}

// rateWindow cuts time for a rate: the window in which Burst units accrue, stretched to
// MinRateWindow if shorter, with the whole units that accrue in it as its allowance.
func rateWindow(r ratelimit.Rate) windowSpec {
	burst := r.Burst
	if burst <= 0 {
		burst = max(1, int(r.PerSecond/10))
	}
	if float64(burst)/r.PerSecond < MinRateWindow.Seconds() {
		burst = int(math.Ceil(r.PerSecond * MinRateWindow.Seconds()))
	}
	return windowSpec{size: time.Duration(float64(burst) / r.PerSecond * float64(time.Second)), allowance: burst}
}

func (w windowSpec) index(t time.Time) int64     { return t.UnixNano() / int64(w.size) }
func (w windowSpec) start(index int64) time.Time { return time.Unix(0, index*int64(w.size)) }

func (d *RateLimiter) spec(key string) *windowSpec {
	d.mu.Lock()
	defer d.mu.Unlock()
	s, ok := d.specs[key]
	if !ok {
		if r, found := ratelimit.RateFor(d.rates, key); found && r.PerSecond > 0 {
			w := rateWindow(r)
			s = &w
		}
		d.specs[key] = s
	}
	return s
}

// Wait blocks until n units for key have been taken, or returns ctx's error. Units already taken
// when ctx ends stay taken (as with the local Limiter: conservative, not a leak). DynamoDB
// failures are returned with a notify code (ETHROTTLED, EUNAVAILABLE, ENOTFOUND for a missing
// table, EAUTH).
func (d *RateLimiter) Wait(ctx context.Context, key string, n int) error {
	w := d.spec(key)
	if w == nil || n <= 0 {
		return ctx.Err()
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		idx := w.index(d.clock.Now())
		got, err := d.take(ctx, key, w, idx, min(n, w.allowance))
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		if n -= got; n == 0 {
			return nil
		}
		// This window has nothing more for us: wait for the next one.
		pause := w.start(idx+1).Sub(d.clock.Now()) + rand.N(w.size/4+1)
		if err := ratelimit.Sleep(ctx, pause); err != nil {
			return err
		}
	}
}

// take takes up to want units from window idx of key and returns how many it got: want if they
// fit, what is left if less, 0 if the window is full.
func (d *RateLimiter) take(ctx context.Context, key string, w *windowSpec, idx int64, want int) (int, error) {
	if d.seenFull(key, idx) {
		return 0, nil
	}
	for want > 0 {
		used, ok, err := d.add(ctx, key, w, idx, want)
		if err != nil {
			return 0, err
		}
		if ok {
			if used >= w.allowance {
				d.markFull(key, idx)
			}
			return want, nil
		}
		if used >= w.allowance {
			d.markFull(key, idx)
			return 0, nil
		}
		want = min(want, w.allowance-used) // someone took part of it meanwhile; take what is left
	}
	return 0, nil
}

// add is the one conditional write: window idx of key gets n more units unless that would take
// it over the allowance. It reports the window's count after the write (ok) or as found (not ok).
func (d *RateLimiter) add(ctx context.Context, key string, w *windowSpec, idx int64, n int) (used int, ok bool, err error) {
	expires := w.start(idx + 1).Add(rateItemTTL).Unix()
	out, err := d.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           aws.String(d.table),
		Key:                 map[string]types.AttributeValue{"key": &types.AttributeValueMemberS{Value: windowKey(key, w, idx)}},
		UpdateExpression:    aws.String("SET expires = :exp ADD used :n"),
		ConditionExpression: aws.String("attribute_not_exists(used) OR used <= :max"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":n":   &types.AttributeValueMemberN{Value: strconv.Itoa(n)},
			":max": &types.AttributeValueMemberN{Value: strconv.Itoa(w.allowance - n)},
			":exp": &types.AttributeValueMemberN{Value: strconv.FormatInt(expires, 10)},
		},
		ReturnValues:                        types.ReturnValueUpdatedNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err == nil {
		return usedIn(out.Attributes, n), true, nil
	}
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		// Without the old item (an emulator may not return it) assume the window is full.
		return usedIn(ccf.Item, w.allowance), false, nil
	}
	return 0, false, awserr.Wrap(err, rateLimitCodes, "ddb: rate limiter: take %d for %s from %s", n, key, d.table)
}

// windowKey names window idx of key; the window size is part of it, so processes briefly
// running with different rates (a deploy) count in different items rather than misreading
// each other's.
func windowKey(key string, w *windowSpec, idx int64) string {
	return key + "#" + strconv.FormatInt(int64(w.size), 10) + "#" + strconv.FormatInt(idx, 10)
}

// usedIn reads the "used" count from an item, or returns def.
func usedIn(item map[string]types.AttributeValue, def int) int {
	if v, ok := item["used"].(*types.AttributeValueMemberN); ok {
		if n, err := strconv.Atoi(v.Value); err == nil {
			return n
		}
	}
	return def
}

func (d *RateLimiter) seenFull(key string, idx int64) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.full[key] == idx
}

func (d *RateLimiter) markFull(key string, idx int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if idx > d.full[key] {
		d.full[key] = idx
	}
}

// CreateRateLimitTable creates the limiter's table (partition key "key", on-demand) if it does not
// exist, waits for it, and turns on TTL on "expires". infra/ creates the same table in AWS; this
// is for tests and local setups.
func CreateRateLimitTable(ctx context.Context, client *dynamodb.Client, table string) error {
	_, err := client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("key"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("key"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return awserr.Wrap(err, rateLimitCodes, "ddb: rate limiter: create table %s", table)
	}
	waiter := dynamodb.NewTableExistsWaiter(client, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay = 100 * time.Millisecond
		o.MaxDelay = 2 * time.Second
	})
	if err := waiter.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}, 2*time.Minute); err != nil {
		return notify.Wrap(notify.EUNAVAILABLE, err, "ddb: rate limiter: wait for table %s", table)
	}
	ttl, err := client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
	if err != nil {
		return awserr.Wrap(err, rateLimitCodes, "ddb: rate limiter: describe TTL of %s", table)
	}
	if d := ttl.TimeToLiveDescription; d != nil && aws.ToString(d.AttributeName) == "expires" &&
		(d.TimeToLiveStatus == types.TimeToLiveStatusEnabled || d.TimeToLiveStatus == types.TimeToLiveStatusEnabling) {
		return nil
	}
	_, err = client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName:               aws.String(table),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String("expires"), Enabled: aws.Bool(true)},
	})
	if err != nil {
		return awserr.Wrap(err, rateLimitCodes, "ddb: rate limiter: enable TTL on %s", table)
	}
	return nil
}

// rateLimitCodes maps DynamoDB (and generic AWS) error codes to Herald's codes.
var rateLimitCodes = map[string]string{
	"ProvisionedThroughputExceededException": notify.ETHROTTLED,
	"ThrottlingException":                    notify.ETHROTTLED,
	"RequestLimitExceeded":                   notify.ETHROTTLED,
	"ResourceNotFoundException":              notify.ENOTFOUND,
	"ValidationException":                    notify.EINVALID,
	"AccessDeniedException":                  notify.EAUTH,
	"UnrecognizedClientException":            notify.EAUTH,
	"ExpiredTokenException":                  notify.EAUTH,
	"InternalServerError":                    notify.EUNAVAILABLE,
	"ServiceUnavailable":                     notify.EUNAVAILABLE,
}
