package api

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"testing"

	"herald/internal/notify"
)

// The same idempotency key with another request is a 409 idempotency_key_reused, and nothing
// is queued; the same request again is still a 200 with the first id.
func TestSendKeyReusedWithAnotherBody(t *testing.T) {
	t.Parallel()
	e := setup(t)
	req := pushRequest()
	req["idempotency_key"] = "order-43-shipped"
	first := decodeBody[acceptedResponse](t, e.do(t, "POST", "/v1/notifications", ordersKey, req))
	msgs := e.receiveAll(t, notify.IngestQueue("orders"))
	if len(msgs) != 1 || msgs[0].Attributes[notify.AttrFingerprint] == "" {
		t.Fatalf("queued %d messages, attributes %v; want one carrying the request fingerprint", len(msgs), msgs)
	}
	// What ingest stores for it.
	var sr notify.SendRequest
	if err := json.Unmarshal(msgs[0].Body, &sr); err != nil {
		t.Fatal(err)
	}
	n := sr.Notification(first.ID, "orders", e.clock.Now())
	n.Fingerprint = msgs[0].Attributes[notify.AttrFingerprint]
	if _, _, err := e.store.CreateNotification(context.Background(), n); err != nil {
		t.Fatal(err)
	}

	rec := e.do(t, "POST", "/v1/notifications", ordersKey, req)
	wantStatus(t, rec, http.StatusOK)
	if got := decodeBody[acceptedResponse](t, rec); got.ID != first.ID {
		t.Fatalf("retry id %s, want %s", got.ID, first.ID)
	}
	other := pushRequest()
	other["idempotency_key"] = "order-43-shipped"
	other["content"] = map[string]any{"title": "Delivered", "body": "Your order arrived"}
	wantError(t, e.do(t, "POST", "/v1/notifications", ordersKey, other), http.StatusConflict, notify.EKEYREUSED, "idempotency_key")
	if n := len(e.receiveAll(t, notify.IngestQueue("orders"))); n != 0 {
		t.Fatalf("queued %d messages after a stored request, want 0", n)
	}
}

// GET /v1/notifications/{id} breaks skipped and failed deliveries down by reason.
func TestGetNotificationByReason(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	n, ds, _, _ := seedNotification(t, e, "n_reasons")
	now := e.clock.Now()
	if _, _, err := e.store.ClaimDeliveries(ctx, n.ID, []string{ds[0].ID}, now, now.Add(60e9)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.CompleteDeliveries(ctx, n.ID, []notify.DeliveryUpdate{{ID: ds[0].ID, Status: notify.DeliveryExpired,
		Reason: notify.ReasonExpired, At: now}}); err != nil {
		t.Fatal(err)
	}
	rec := e.do(t, "GET", "/v1/notifications/"+n.ID, ordersKey, nil)
	wantStatus(t, rec, http.StatusOK)
	v := decodeBody[notificationView](t, rec)
	if !reflect.DeepEqual(v.SkippedByReason, map[string]int{notify.ReasonNoAddress: 1}) ||
		!reflect.DeepEqual(v.FailedByReason, map[string]int{notify.ReasonExpired: 1}) {
		t.Fatalf("by reason: skipped %v failed %v, want no_address 1 / expired 1", v.SkippedByReason, v.FailedByReason)
	}
	if got := v.Stats[notify.ChannelPush]; got != (channelStats{Total: 1, Failed: 1}) {
		t.Fatalf("push stats %+v, want the expired delivery as failed", got)
	}
}
