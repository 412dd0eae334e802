package ddb

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/guregu/dynamo/v2"
	"github.com/guregu/dynamo/v2/dynamodbiface"

	"herald/internal/notify"
	"herald/internal/notify/storetest"
	"herald/internal/seal"
)

const endpointEnv = "HERALD_DYNAMODB_ENDPOINT"

var (
	testDBOnce sync.Once
	testDB     *dynamo.DB
)

// testClient returns a client for DynamoDB Local at $HERALD_DYNAMODB_ENDPOINT, or skips.
func testClient(t testing.TB) *dynamo.DB {
	t.Helper()
	endpoint := os.Getenv(endpointEnv)
	if endpoint == "" {
		t.Skip("set HERALD_DYNAMODB_ENDPOINT (make test starts DynamoDB Local) to run the DynamoDB adapter tests")
	}
	testDBOnce.Do(func() {
		cfg := aws.Config{
			Region:      "us-east-1",
			Credentials: credentials.NewStaticCredentialsProvider("heraldtest", "heraldtest", ""),
			// Parallel subtests each run up to 16 requests at once: keep those connections.
			HTTPClient: awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
				tr.MaxIdleConnsPerHost = 64
			}),
		}
		testDB = dynamo.New(cfg, func(o *dynamodb.Options) {
			o.BaseEndpoint = aws.String(endpoint)
			// DynamoDB Local's 4xx answers carry no CRC32 the SDK could check; without this each
			// expected conditional failure logs a checksum warning.
			o.DisableValidateResponseChecksum = true
		})
	})
	return testDB
}

func testCipher(t testing.TB) notify.Cipher {
	t.Helper()
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	box, err := seal.New(key)
	if err != nil {
		t.Fatal(err)
	}
	return box
}

// newTestStore creates a fresh set of tables under a random prefix (DynamoDB Local keeps them in
// memory; they are dropped when the test ends) and a Store on them.
func newTestStore(t testing.TB) (*Store, Tables) {
	t.Helper()
	return newTestStoreOn(t, testClient(t))
}

// newTestStoreOn is newTestStore through the client db.
func newTestStoreOn(t testing.TB, db *dynamo.DB) (*Store, Tables) {
	t.Helper()
	tables := TablesWithPrefix("t" + randomToken()[:12] + "-")
	if err := CreateTables(context.Background(), db, tables); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, spec := range TableSpecs(tables) {
			_ = db.Table(spec.Name).DeleteTable().Run(context.Background())
		}
	})
	s, err := New(db, tables, testCipher(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	return s, tables
}

// TestStore runs the notify.Store conformance suite, each case on its own tables: the suite uses
// fixed user and item ids, so cases cannot share tables.
func TestStore(t *testing.T) {
	t.Parallel()
	testClient(t)
	storetest.Run(t, func(t *testing.T) notify.Store {
		s, _ := newTestStore(t)
		return s.KeepRecipientIndex()
	})
}

// A store that keeps no recipient index files nothing under a user (no ruser attribute: the
// index costs nothing) and answers a listing by user with notify.ErrNoRecipientIndex.
func TestNoRecipientIndex(t *testing.T) {
	t.Parallel()
	s, tables := newTestStore(t)
	n := &notify.Notification{ID: "n_noindex", Service: "shop", Category: notify.CategoryTransactional,
		Channels: []notify.Channel{notify.ChannelPush}, Content: notify.Content{Body: "hi"},
		Recipients: []notify.Recipient{{UserID: "alice"}}, Status: notify.StatusAccepted}
	if _, _, err := s.CreateNotification(t.Context(), n); err != nil {
		t.Fatal(err)
	}
	var it notificationItem
	if err := s.db.Table(tables.Notifications).Get(attrPK, notificationPK(n.ID)).Range(attrSK, dynamo.Equal, skNotification).One(t.Context(), &it); err != nil {
		t.Fatal(err)
	}
	if it.RecipientUser != "" {
		t.Errorf("ruser = %q on a store without the index", it.RecipientUser)
	}
	_, _, err := s.ListNotifications(t.Context(), notify.NotificationFilter{User: "alice"}, "", 10)
	if !errors.Is(err, notify.ErrNoRecipientIndex) {
		t.Fatalf("listing by user without the index: %v, want ErrNoRecipientIndex", err)
	}
	s.KeepRecipientIndex()
	if _, _, err := s.ListNotifications(t.Context(), notify.NotificationFilter{User: "alice"}, "not a cursor", 10); notify.ErrorCode(err) != notify.EINVALID {
		t.Fatalf("a bad cursor: %v, want EINVALID", err)
	}
}

func TestNewRequiresCipher(t *testing.T) {
	t.Parallel()
	db := dynamo.New(aws.Config{Region: "us-east-1"})
	if _, err := New(db, TablesWithPrefix("herald-"), nil, nil); err == nil {
		t.Fatal("New with a nil cipher succeeded; contacts would be stored in plaintext")
	}
	if _, err := New(db, Tables{}, testCipher(t), nil); err == nil {
		t.Fatal("New with empty table names succeeded")
	}
	if _, err := New(db, TablesWithPrefix("herald-"), testCipher(t), nil); err != nil {
		t.Fatalf("New: %v", err)
	}
}

// TestTableSpecs pins the parts of the design that code elsewhere (the CDK app) must mirror.
func TestTableSpecs(t *testing.T) {
	t.Parallel()
	tables := TablesWithPrefix("herald-prod-")
	specs := TableSpecs(tables)
	byName := map[string]TableSpec{}
	for _, sp := range specs {
		byName[sp.Name] = sp
		in := sp.createInput()
		if in.BillingMode != types.BillingModePayPerRequest {
			t.Errorf("%s: billing mode %s", sp.Name, in.BillingMode)
		}
		// Every key attribute of the table and its indexes is defined exactly once.
		defined := map[string]int{}
		for _, d := range in.AttributeDefinitions {
			defined[aws.ToString(d.AttributeName)]++
		}
		for name, k := range defined {
			if k != 1 {
				t.Errorf("%s: attribute %s defined %d times", sp.Name, name, k)
			}
		}
	}
	if len(byName) != 5 {
		t.Fatalf("%d distinct tables, want 5", len(byName))
	}
	for name, ttl := range map[string]string{tables.Notifications: "ttl", tables.Deliveries: "ttl", tables.Inbox: "ttl",
		tables.Users: "", tables.Suppressions: ""} {
		if got := byName[name].TTLAttribute; got != ttl {
			t.Errorf("%s: TTL attribute %q, want %q", name, got, ttl)
		}
	}
	if g := byName[tables.Deliveries].GlobalIndexes; len(g) != 1 || g[0].Name != indexByNotification || g[0].Projection != ProjectKeysOnly {
		t.Errorf("deliveries indexes = %+v", g)
	}
	// An inbox item is one write unit: no index to keep (package doc).
	if in := byName[tables.Inbox]; len(in.LocalIndexes)+len(in.GlobalIndexes) != 0 || in.SortKey == nil || in.SortKey.Name != attrInboxOrder {
		t.Errorf("inbox table = %+v, want sort key %s and no index", in, attrInboxOrder)
	}
}

type fakeAPIError struct{ code, msg string }

func (e fakeAPIError) Error() string                 { return e.code + ": " + e.msg }
func (e fakeAPIError) ErrorCode() string             { return e.code }
func (e fakeAPIError) ErrorMessage() string          { return e.msg }
func (e fakeAPIError) ErrorFault() smithy.ErrorFault { return smithy.FaultClient }

func TestErrorCodes(t *testing.T) {
	t.Parallel()
	canceled := func(codes ...string) error {
		tce := &types.TransactionCanceledException{}
		for _, c := range codes {
			tce.CancellationReasons = append(tce.CancellationReasons, types.CancellationReason{Code: aws.String(c)})
		}
		return &smithy.OperationError{ServiceID: "DynamoDB", OperationName: "TransactWriteItems", Err: tce}
	}
	for _, c := range []struct {
		err  error
		code string
	}{
		{&types.ConditionalCheckFailedException{}, notify.ECONFLICT},
		{canceled("None", "ConditionalCheckFailed"), notify.ECONFLICT},
		{canceled("TransactionConflict", "None"), notify.EUNAVAILABLE},
		{&types.ProvisionedThroughputExceededException{}, notify.EUNAVAILABLE},
		{fakeAPIError{"ThrottlingException", "slow down"}, notify.EUNAVAILABLE},
		{&types.RequestLimitExceeded{}, notify.EUNAVAILABLE},
		{&types.InternalServerError{}, notify.EUNAVAILABLE},
		{fakeAPIError{"ValidationException", "Item size has exceeded the maximum allowed size"}, notify.ETOOLARGE},
		{fakeAPIError{"ValidationException", "One or more parameter values were invalid"}, notify.EINVALID},
		{&types.ResourceNotFoundException{}, notify.EINTERNAL},
		{dynamo.ErrNotFound, notify.ENOTFOUND},
		{context.DeadlineExceeded, notify.EUNAVAILABLE},
		{&smithy.OperationError{ServiceID: "DynamoDB", Err: errors.New("dial tcp: connection refused")}, notify.EUNAVAILABLE},
		{errors.New("something else"), notify.EINTERNAL},
		{notify.Errorf(notify.ENOTFOUND, "kept"), notify.ENOTFOUND},
	} {
		err := wrapErr("claim deliveries", c.err)
		if got := notify.ErrorCode(err); got != c.code {
			t.Errorf("%v: code %q, want %q", c.err, got, c.code)
		}
		if !strings.HasPrefix(err.Error(), "ddb: claim deliveries: ") {
			t.Errorf("%v: message %q lacks the operation", c.err, err)
		}
		if !errors.Is(err, c.err) {
			t.Errorf("%v: cause lost in %v", c.err, err)
		}
	}
	if wrapErr("x", nil) != nil {
		t.Fatal("wrapErr(nil) != nil")
	}
}

// TestEncodeRecipients: recipients too large to share a chunk of 500 are split further, and
// everything comes back in order.
func TestEncodeRecipients(t *testing.T) {
	t.Parallel()
	big := make([]notify.Recipient, 1200)
	for i := range big {
		b := make([]byte, 1000) // incompressible: 500 of these are over the chunk size
		if _, err := rand.Read(b); err != nil {
			t.Fatal(err)
		}
		big[i] = notify.Recipient{FCMToken: base64.StdEncoding.EncodeToString(b)}
	}
	chunks, err := encodeRecipients(big)
	if err != nil {
		t.Fatal(err)
	}
	if len(chunks) <= 3 {
		t.Fatalf("%d chunks for 1200 large recipients; want them split below %d bytes", len(chunks), recipientChunkBytes)
	}
	var back []notify.Recipient
	for _, c := range chunks {
		if len(c.data) > recipientChunkBytes || c.count > recipientsPerChunk {
			t.Fatalf("chunk of %d recipients, %d bytes", c.count, len(c.data))
		}
		rs, err := gunzipRecipients(c.data)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != c.count {
			t.Fatalf("chunk says %d recipients, holds %d", c.count, len(rs))
		}
		back = append(back, rs...)
	}
	if !reflect.DeepEqual(back, big) {
		t.Fatal("recipients changed in the round trip")
	}
	huge := make([]byte, recipientChunkBytes)
	if _, err := rand.Read(huge); err != nil {
		t.Fatal(err)
	}
	if _, err := encodeRecipients([]notify.Recipient{{FCMToken: base64.StdEncoding.EncodeToString(huge)}}); !notify.IsCode(err, notify.ETOOLARGE) {
		t.Fatalf("a recipient over the chunk size: %v, want ETOOLARGE", err)
	}
}

// scanAll returns every item of every table.
func scanAll(t *testing.T, s *Store, tables Tables) map[string][]dynamo.Item {
	t.Helper()
	out := map[string][]dynamo.Item{}
	for _, spec := range TableSpecs(tables) {
		var items []dynamo.Item
		if err := s.db.Table(spec.Name).Scan().Consistent(true).All(t.Context(), &items); err != nil {
			t.Fatalf("scan %s: %v", spec.Name, err)
		}
		out[spec.Name] = items
	}
	return out
}

// attrStrings flattens every string, number and binary value (and every map key) of av.
func attrStrings(av types.AttributeValue, out []string) []string {
	switch v := av.(type) {
	case *types.AttributeValueMemberS:
		out = append(out, v.Value)
	case *types.AttributeValueMemberN:
		out = append(out, v.Value)
	case *types.AttributeValueMemberB:
		out = append(out, string(v.Value))
	case *types.AttributeValueMemberSS:
		out = append(out, v.Value...)
	case *types.AttributeValueMemberBS:
		for _, b := range v.Value {
			out = append(out, string(b))
		}
	case *types.AttributeValueMemberL:
		for _, e := range v.Value {
			out = attrStrings(e, out)
		}
	case *types.AttributeValueMemberM:
		for k, e := range v.Value {
			out = append(out, k)
			out = attrStrings(e, out)
		}
	}
	return out
}

// TestNoPersonalDataAtRest writes a contact and deliveries with raw addresses, takes them
// through their life cycle, then scans every table for the addresses.
func TestNoPersonalDataAtRest(t *testing.T) {
	t.Parallel()
	s, tables := newTestStore(t)
	ctx := t.Context()
	const (
		email = "very.private.person@example.com"
		phone = "+821098765432"
		token = "fcm-token-THAT-MUST-NOT-LEAK-0123456789"
	)
	if err := s.PutContact(ctx, notify.Contact{UserID: "u1", Email: email, Phone: phone, Locale: "ko"}); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetContacts(ctx, []string{"u1"})
	if err != nil {
		t.Fatal(err)
	}
	if got["u1"].Email != email || got["u1"].Phone != phone {
		t.Fatalf("contact round trip = %+v", got["u1"])
	}

	n := &notify.Notification{ID: "n_1", Service: "billing", Status: notify.StatusProcessing,
		Recipients: []notify.Recipient{{UserID: "u1"}}}
	if _, _, err := s.CreateNotification(ctx, n); err != nil {
		t.Fatal(err)
	}
	var ds []notify.Delivery
	for _, x := range []struct {
		ch   notify.Channel
		addr string
	}{{notify.ChannelEmail, email}, {notify.ChannelSMS, phone}, {notify.ChannelPush, token}} {
		ds = append(ds, notify.Delivery{ID: notify.DeliveryID(n.ID, x.ch, x.addr), NotificationID: n.ID, UserID: "u1",
			Channel: x.ch, Address: x.addr, AddressMasked: notify.MaskAddress(x.ch, x.addr), Status: notify.DeliveryPending})
	}
	ids := []string{ds[0].ID, ds[1].ID, ds[2].ID}
	if _, err := s.CreateDeliveries(ctx, n.ID, 0, ds); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	claimed, _, err := s.ClaimDeliveries(ctx, n.ID, ids, now, now.Add(time.Minute))
	if err != nil || len(claimed) != 3 {
		t.Fatalf("claimed %d: %v", len(claimed), err)
	}
	for _, d := range claimed {
		if d.Address != "" {
			t.Fatalf("claimed delivery carries raw address %q", d.Address)
		}
	}
	if _, err := s.CompleteDeliveries(ctx, n.ID, []notify.DeliveryUpdate{{ID: ids[0], Status: notify.DeliverySent, At: now}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Suppress(ctx, notify.Suppression{AddressKey: notify.AddressKey(notify.ChannelEmail, email),
		Masked: notify.MaskEmail(email), Channel: notify.ChannelEmail, Reason: "bounce"}); err != nil {
		t.Fatal(err)
	}

	secrets := []string{email, phone, token, "very.private", "98765432", "MUST-NOT-LEAK"}
	all := scanAll(t, s, tables)
	if len(all[tables.Users]) == 0 || len(all[tables.Deliveries]) != 3 || len(all[tables.Suppressions]) != 1 {
		t.Fatalf("scan found %d user items, %d deliveries, %d suppressions", len(all[tables.Users]),
			len(all[tables.Deliveries]), len(all[tables.Suppressions]))
	}
	for table, items := range all {
		for _, item := range items {
			for name, av := range item {
				for _, v := range append(attrStrings(av, nil), name) {
					for _, secret := range secrets {
						if strings.Contains(v, secret) {
							t.Errorf("%s: attribute %s holds %q in plaintext", table, name, secret)
						}
					}
				}
			}
		}
	}
}

// TestCreateDeliveriesResumesAfterCrash: a chunk of 500 takes several transactions; a crash
// after some of them leaves those deliveries counted and the chunk unmarked, and the
// redelivered chunk counts only the rest.
func TestCreateDeliveriesResumesAfterCrash(t *testing.T) {
	t.Parallel()
	s, _ := newTestStore(t)
	ctx := t.Context()
	n := &notify.Notification{ID: notify.NewID("n_", time.Now()), Service: "billing", Status: notify.StatusProcessing}
	if _, _, err := s.CreateNotification(ctx, n); err != nil {
		t.Fatal(err)
	}
	ds := make([]notify.Delivery, 500)
	for i := range ds {
		addr := fmt.Sprintf("token-%03d-abcdefghijklmnop", i)
		st := notify.DeliveryPending
		if i%10 == 0 {
			st = notify.DeliverySkipped
		}
		ds[i] = notify.Delivery{ID: notify.DeliveryID(n.ID, notify.ChannelPush, addr), NotificationID: n.ID,
			Channel: notify.ChannelPush, Provider: notify.ProviderFCM, Address: addr, AddressMasked: notify.MaskToken(addr), Status: st}
	}
	// The crashed attempt: the first transactions (plus one more overlapping delivery) went through.
	status := map[string]string{}
	w := chunkWrite{notificationID: n.ID, chunk: 0, shard: chunkShard(0), now: time.Now(), register: true}
	for _, group := range batchesOf(ds[:200], deliveriesPerTx) {
		if err := s.insertDeliveries(ctx, &w, group, status); err != nil {
			t.Fatal(err)
		}
	}
	st := stats(t, s, n.ID)
	if c := st.Channels[notify.ChannelPush]; c.Total != 200 || c.Skipped != 20 || st.ChunksPrepared != 0 {
		t.Fatalf("after the crash: %+v, chunks prepared %d", c, st.ChunksPrepared)
	}
	for round := range 2 {
		pending, err := s.CreateDeliveries(ctx, n.ID, 0, ds)
		if err != nil {
			t.Fatal(err)
		}
		if len(pending) != 450 {
			t.Fatalf("round %d: %d pending, want 450", round, len(pending))
		}
		st := stats(t, s, n.ID)
		if c := st.Channels[notify.ChannelPush]; c != (notify.ChannelStats{Total: 500, Skipped: 50}) || st.ChunksPrepared != 1 {
			t.Fatalf("round %d: %+v, chunks prepared %d", round, c, st.ChunksPrepared)
		}
	}
}

func stats(t *testing.T, s *Store, id string) notify.Stats {
	t.Helper()
	n, err := s.GetNotification(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return n.Stats
}

// TestConcurrentCompletesCountExactly: workers completing overlapping verdicts at once contend
// for counter shards (TransactionConflict); every verdict still counts exactly once.
func TestConcurrentCompletesCountExactly(t *testing.T) {
	t.Parallel()
	s, _ := newTestStore(t)
	ctx := t.Context()
	n := &notify.Notification{ID: notify.NewID("n_", time.Now()), Service: "billing", Status: notify.StatusProcessing}
	if _, _, err := s.CreateNotification(ctx, n); err != nil {
		t.Fatal(err)
	}
	ds := make([]notify.Delivery, 400)
	ids := make([]string, len(ds))
	for i := range ds {
		addr := fmt.Sprintf("user%03d@example.com", i)
		ds[i] = notify.Delivery{ID: notify.DeliveryID(n.ID, notify.ChannelEmail, addr), NotificationID: n.ID,
			Channel: notify.ChannelEmail, Provider: notify.ProviderSES, AddressMasked: notify.MaskEmail(addr)}
		ids[i] = ds[i].ID
	}
	if pending, err := s.CreateDeliveries(ctx, n.ID, 0, ds); err != nil || len(pending) != len(ds) {
		t.Fatalf("%d pending: %v", len(pending), err)
	}
	now := time.Now()
	if claimed, _, err := s.ClaimDeliveries(ctx, n.ID, ids, now, now.Add(time.Minute)); err != nil || len(claimed) != len(ds) {
		t.Fatalf("%d claimed: %v", len(claimed), err)
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		applied int
		errs    []error
	)
	for w := range 6 {
		wg.Go(func() {
			// Each worker sends every verdict, in its own batches of 25 to 75: all but one
			// application of each is ignored.
			batch := 25 + w*10
			for lo := 0; lo < len(ids); lo += batch {
				var us []notify.DeliveryUpdate
				for _, id := range ids[lo:min(lo+batch, len(ids))] {
					st := notify.DeliverySent
					if id[len(id)-1] < '4' {
						st = notify.DeliveryFailed
					}
					us = append(us, notify.DeliveryUpdate{ID: id, Status: st, At: now})
				}
				k, err := s.CompleteDeliveries(ctx, n.ID, us)
				mu.Lock()
				applied += k
				if err != nil {
					errs = append(errs, err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		t.Fatal(err)
	}
	if applied != len(ds) {
		t.Fatalf("applied %d verdicts in all, want %d", applied, len(ds))
	}
	var want notify.ChannelStats
	want.Total = len(ds)
	for _, id := range ids {
		if id[len(id)-1] < '4' {
			want.Failed++
		} else {
			want.Sent++
		}
	}
	if got := stats(t, s, n.ID).Channels[notify.ChannelEmail]; got != want {
		t.Fatalf("stats = %+v, want %+v", got, want)
	}
}

// TestCreateNotificationWritesChunksAhead: recipients that do not fit one transaction are
// written first under a version only the winning main item names; a losing write's chunks are
// removed and never read.
func TestCreateNotificationWritesChunksAhead(t *testing.T) {
	t.Parallel()
	s, tables := newTestStore(t)
	s.txBudget = 1 // every notification with recipients takes the write-ahead path
	ctx := t.Context()
	mk := func(tag string) *notify.Notification {
		n := &notify.Notification{ID: "n_ahead", Service: "billing", IdempotencyKey: "k", Status: notify.StatusAccepted,
			Recipients: make([]notify.Recipient, 1234)}
		for i := range n.Recipients {
			n.Recipients[i] = notify.Recipient{UserID: fmt.Sprintf("%s-%04d", tag, i)}
		}
		return n
	}
	first := mk("first")
	if _, created, err := s.CreateNotification(ctx, first); err != nil || !created {
		t.Fatalf("created %v: %v", created, err)
	}
	stored, created, err := s.CreateNotification(ctx, mk("second"))
	if err != nil || created || stored.RecipientCount != 1234 {
		t.Fatalf("second create: created %v, %d recipients, %v", created, stored.RecipientCount, err)
	}
	rs, err := s.GetRecipients(ctx, first.ID, 490, 30)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rs, first.Recipients[490:520]) {
		t.Fatalf("GetRecipients = %v", rs)
	}
	chunks := 0
	for _, it := range scanAll(t, s, tables)[tables.Notifications] {
		if strings.HasPrefix(stringAttr(it, attrSK), skRecipients) {
			chunks++
		}
	}
	if chunks != 3 {
		t.Fatalf("%d recipient chunks stored, want the first write's 3", chunks)
	}
}

// TestCreateNotificationRace: requests with one idempotency key racing each other create one
// notification, and every one of them is answered with it.
func TestCreateNotificationRace(t *testing.T) {
	t.Parallel()
	s, _ := newTestStore(t)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		created int
		ids     = map[string]bool{}
	)
	for i := range 8 {
		wg.Go(func() {
			n := &notify.Notification{ID: fmt.Sprintf("n_race_%d", i), Service: "billing", IdempotencyKey: "same",
				Status: notify.StatusAccepted, Recipients: []notify.Recipient{{UserID: "u1"}}}
			stored, ok, err := s.CreateNotification(t.Context(), n)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Errorf("create %d: %v", i, err)
				return
			}
			if ok {
				created++
			}
			ids[stored.ID] = true
		})
	}
	wg.Wait()
	if created != 1 || len(ids) != 1 {
		t.Fatalf("created %d, answered with ids %v; want 1 and one id", created, ids)
	}
}

// contendedClient fails the first attempt of every update and transaction (told apart by what
// they write) as DynamoDB does under contention — a TransactionConflict cancellation, a
// TransactionConflictException — which DynamoDB Local, serializing requests, never does: each
// is retried once, whatever the concurrency, so the test checks the retry and not the luck of
// an interleaving.
type contendedClient struct {
	dynamodbiface.DynamoDBAPI
	mu       sync.Mutex
	seen     map[string]bool
	injected int
}

// first reports whether the request keyed k is seen for the first time.
func (c *contendedClient) first(k string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil {
		c.seen = map[string]bool{}
	}
	if c.seen[k] {
		return false
	}
	c.seen[k] = true
	c.injected++
	return true
}

// transactKeys names a transaction by the first item it writes (its table and key, not its
// values, which a retry may compute anew: a timestamp, an allocated sequence number).
func transactKeys(items []types.TransactWriteItem) string {
	if len(items) == 0 {
		return ""
	}
	it := items[0]
	var table *string
	key := map[string]types.AttributeValue{}
	switch {
	case it.Put != nil:
		table = it.Put.TableName
		for _, a := range []string{attrPK, attrSK, attrDeliveryID} {
			if v, ok := it.Put.Item[a]; ok {
				key[a] = v
			}
		}
	case it.Update != nil:
		table, key = it.Update.TableName, it.Update.Key
	case it.Delete != nil:
		table, key = it.Delete.TableName, it.Delete.Key
	case it.ConditionCheck != nil:
		table, key = it.ConditionCheck.TableName, it.ConditionCheck.Key
	}
	k, _ := json.Marshal(key)
	return aws.ToString(table) + string(k)
}

func (c *contendedClient) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput,
	opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	if c.first(transactKeys(in.TransactItems)) {
		reasons := make([]types.CancellationReason, len(in.TransactItems))
		for i := range reasons {
			reasons[i].Code = aws.String("None")
		}
		reasons[len(reasons)-1].Code = aws.String("TransactionConflict")
		return nil, &types.TransactionCanceledException{Message: aws.String("Transaction cancelled"), CancellationReasons: reasons}
	}
	return c.DynamoDBAPI.TransactWriteItems(ctx, in, opts...)
}

func (c *contendedClient) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput,
	opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	k, _ := json.Marshal(in.Key)
	if c.first(aws.ToString(in.TableName) + string(k)) {
		return nil, &types.TransactionConflictException{Message: aws.String("Transaction is ongoing for the item")}
	}
	return c.DynamoDBAPI.UpdateItem(ctx, in, opts...)
}

// TestContentionRetried: transaction conflicts and throttling are retried with backoff, and a
// retried transaction counts once.
func TestContentionRetried(t *testing.T) {
	t.Parallel()
	s, _ := newTestStore(t)
	cc := &contendedClient{DynamoDBAPI: s.client}
	s.client = cc
	ctx := t.Context()

	n := &notify.Notification{ID: notify.NewID("n_", time.Now()), Service: "billing", IdempotencyKey: "k1",
		Status: notify.StatusAccepted, Recipients: []notify.Recipient{{UserID: "u1"}}}
	if _, created, err := s.CreateNotification(ctx, n); err != nil || !created {
		t.Fatalf("create: %v %v", created, err)
	}
	if err := s.SetNotificationStatus(ctx, n.ID, notify.StatusProcessing, notify.StatusAccepted); err != nil {
		t.Fatal(err)
	}
	ds := make([]notify.Delivery, 250)
	ids := make([]string, len(ds))
	for i := range ds {
		addr := fmt.Sprintf("+8210%08d", i)
		ds[i] = notify.Delivery{ID: notify.DeliveryID(n.ID, notify.ChannelSMS, addr), NotificationID: n.ID,
			Channel: notify.ChannelSMS, Provider: notify.ProviderTwilio, AddressMasked: notify.MaskPhone(addr)}
		ids[i] = ds[i].ID
	}
	if pending, err := s.CreateDeliveries(ctx, n.ID, 0, ds); err != nil || len(pending) != len(ds) {
		t.Fatalf("%d pending: %v", len(pending), err)
	}
	now := time.Now()
	claimed, busy, err := s.ClaimDeliveries(ctx, n.ID, ids, now, now.Add(time.Minute))
	if err != nil || len(claimed) != len(ds) || len(busy) != 0 {
		t.Fatalf("%d claimed, %d busy: %v", len(claimed), len(busy), err)
	}
	var us []notify.DeliveryUpdate
	for i, id := range ids {
		st := notify.DeliverySent
		if i%5 == 0 {
			st = notify.DeliveryFailed
		}
		us = append(us, notify.DeliveryUpdate{ID: id, Status: st, At: now})
	}
	if k, err := s.CompleteDeliveries(ctx, n.ID, us); err != nil || k != len(ds) {
		t.Fatalf("applied %d: %v", k, err)
	}
	st := stats(t, s, n.ID)
	if c := st.Channels[notify.ChannelSMS]; c != (notify.ChannelStats{Total: 250, Sent: 200, Failed: 50}) || st.ChunksPrepared != 1 {
		t.Fatalf("stats = %+v, chunks prepared %d", c, st.ChunksPrepared)
	}
	if err := s.PutDevice(ctx, notify.Device{UserID: "u1", Token: "tok", Platform: notify.PlatformFCM}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutDevice(ctx, notify.Device{UserID: "u2", Token: "tok", Platform: notify.PlatformFCM}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteDevice(ctx, "u2", "tok"); err != nil {
		t.Fatal(err)
	}
	if cc.injected < 10 {
		t.Fatalf("only %d conflicts injected", cc.injected)
	}
}

// TestApplyVerdictsLosesRaces: a verdict whose delivery another worker completed between the
// read and the transaction fails its condition; the rest of the group is applied and counted.
func TestApplyVerdictsLosesRaces(t *testing.T) {
	t.Parallel()
	s, _ := newTestStore(t)
	ctx := t.Context()
	n := &notify.Notification{ID: notify.NewID("n_", time.Now()), Service: "billing", Status: notify.StatusProcessing}
	if _, _, err := s.CreateNotification(ctx, n); err != nil {
		t.Fatal(err)
	}
	ds := make([]notify.Delivery, 10)
	ids := make([]string, len(ds))
	for i := range ds {
		ds[i] = notify.Delivery{ID: fmt.Sprintf("d_%02d", i), Channel: notify.ChannelPush, AddressMasked: "tok…"}
		ids[i] = ds[i].ID
	}
	if _, err := s.CreateDeliveries(ctx, n.ID, 0, ds); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if _, _, err := s.ClaimDeliveries(ctx, n.ID, ids, now, now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	current, err := s.readDeliveries(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	var us []notify.DeliveryUpdate
	for _, id := range ids {
		us = append(us, notify.DeliveryUpdate{ID: id, Status: notify.DeliverySent, At: now})
	}
	if k, err := s.CompleteDeliveries(ctx, n.ID, us[:3]); err != nil || k != 3 {
		t.Fatalf("applied %d: %v", k, err)
	}
	k, err := s.applyVerdicts(ctx, n.ID, us, current, now) // read before the three were completed
	if err != nil || k != 7 {
		t.Fatalf("applied %d: %v; want the 7 still SENDING", k, err)
	}
	if c := stats(t, s, n.ID).Channels[notify.ChannelPush]; c != (notify.ChannelStats{Total: 10, Sent: 10}) {
		t.Fatalf("stats = %+v", c)
	}
}

// TestCountersSpreadOverShards: a notification's counters live on the shards of its chunks (one
// for a one-chunk notification, all 16 for a large one), and reads sum exactly those.
func TestCountersSpreadOverShards(t *testing.T) {
	t.Parallel()
	s, _ := newTestStore(t)
	ctx := t.Context()
	shardsOf := func(id string) []int {
		t.Helper()
		var main notificationItem
		if err := s.db.Table(s.tables.Notifications).Get(attrPK, notificationPK(id)).Range(attrSK, dynamo.Equal, skNotification).
			Consistent(true).One(ctx, &main); err != nil {
			t.Fatal(err)
		}
		return main.Shards
	}
	mk := func(chunks int) (string, []string) {
		n := &notify.Notification{ID: notify.NewID("n_", time.Now()), Service: "billing", Status: notify.StatusProcessing}
		if _, _, err := s.CreateNotification(ctx, n); err != nil {
			t.Fatal(err)
		}
		var pending []string
		for c := range chunks {
			ds := make([]notify.Delivery, 5)
			for i := range ds {
				addr := fmt.Sprintf("token-%02d-%d-abcdefghijklmnop", c, i)
				ds[i] = notify.Delivery{ID: notify.DeliveryID(n.ID, notify.ChannelPush, addr), Channel: notify.ChannelPush,
					AddressMasked: notify.MaskToken(addr)}
				if i == 0 {
					ds[i].Status = notify.DeliverySkipped
				}
			}
			p, err := s.CreateDeliveries(ctx, n.ID, c, ds)
			if err != nil {
				t.Fatal(err)
			}
			pending = append(pending, p...)
		}
		return n.ID, pending
	}

	small, pending := mk(1)
	if got := shardsOf(small); !reflect.DeepEqual(got, []int{0}) {
		t.Fatalf("one-chunk notification uses shards %v, want [0]", got)
	}
	now := time.Now()
	if _, _, err := s.ClaimDeliveries(ctx, small, pending, now, now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CompleteDeliveries(ctx, small, verdictsFor(pending, now)); err != nil {
		t.Fatal(err)
	}
	if st := stats(t, s, small); st.Channels[notify.ChannelPush] != (notify.ChannelStats{Total: 5, Sent: 4, Skipped: 1}) || st.ChunksPrepared != 1 {
		t.Fatalf("small: %+v", st)
	}

	large, pending := mk(20)
	if got := shardsOf(large); len(got) != statsShards {
		t.Fatalf("20-chunk notification uses shards %v, want all %d", got, statsShards)
	}
	if _, _, err := s.ClaimDeliveries(ctx, large, pending, now, now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CompleteDeliveries(ctx, large, verdictsFor(pending, now)); err != nil {
		t.Fatal(err)
	}
	if st := stats(t, s, large); st.Channels[notify.ChannelPush] != (notify.ChannelStats{Total: 100, Sent: 80, Skipped: 20}) || st.ChunksPrepared != 20 {
		t.Fatalf("large: %+v", st)
	}
}

func verdictsFor(ids []string, at time.Time) []notify.DeliveryUpdate {
	us := make([]notify.DeliveryUpdate, len(ids))
	for i, id := range ids {
		us[i] = notify.DeliveryUpdate{ID: id, Status: notify.DeliverySent, ProviderMessageID: "pm-" + id, At: at}
	}
	return us
}
