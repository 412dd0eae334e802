package apns

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sideshow/apns2"

	"herald/internal/notify"
)

func TestToNotification(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	long := strings.Repeat("a", 63) + "é" // 65 bytes: the cut must not split é

	tests := []struct {
		name    string
		in      notify.OutboundMessage
		want    apns2.Notification // Payload and ApnsID are checked apart
		payload string
	}{
		{
			name:    "title and body, empty priority is high",
			in:      notify.OutboundMessage{Address: "tok", Content: notify.Content{Title: "Hi", Body: "There"}},
			want:    apns2.Notification{DeviceToken: "tok", Topic: "com.example", Priority: 10, PushType: apns2.PushTypeAlert},
			payload: `{"aps":{"alert":{"title":"Hi","body":"There"},"sound":"default"}}`,
		},
		{
			name: "normal priority, ttl, collapse id",
			in: notify.OutboundMessage{Address: "tok", Priority: notify.PriorityNormal, TTL: time.Hour, CollapseID: "n_1",
				Content: notify.Content{Body: "b"}},
			want: apns2.Notification{DeviceToken: "tok", Topic: "com.example", Priority: 5, PushType: apns2.PushTypeAlert,
				CollapseID: "n_1", Expiration: now.Add(time.Hour)},
			payload: `{"aps":{"alert":{"body":"b"}}}`,
		},
		{
			name: "collapse id cut to 64 bytes on a character boundary",
			in:   notify.OutboundMessage{Address: "tok", Priority: notify.PriorityHigh, CollapseID: long, Content: notify.Content{Body: "b"}},
			want: apns2.Notification{DeviceToken: "tok", Topic: "com.example", Priority: 10, PushType: apns2.PushTypeAlert,
				CollapseID: strings.Repeat("a", 63)},
			payload: `{"aps":{"alert":{"body":"b"},"sound":"default"}}`,
		},
		{
			name: "image, data at the top level, link wins over data",
			in: notify.OutboundMessage{Address: "tok", Priority: notify.PriorityNormal, Content: notify.Content{
				Title: "T", Body: "B", ImageURL: "https://img.example/x.png", Link: "myapp://o/1",
				Data: map[string]string{"order": "1", "link": "old", "aps": "must not replace aps"}}},
			want: apns2.Notification{DeviceToken: "tok", Topic: "com.example", Priority: 5, PushType: apns2.PushTypeAlert},
			payload: `{"aps":{"alert":{"title":"T","body":"B"},"mutable-content":1},` +
				`"order":"1","link":"myapp://o/1","image":"https://img.example/x.png"}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := toNotification(tt.in, "com.example", now)
			b, err := json.Marshal(got.Payload)
			if err != nil {
				t.Fatal(err)
			}
			var gotP, wantP any
			_ = json.Unmarshal(b, &gotP)
			if err := json.Unmarshal([]byte(tt.payload), &wantP); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(gotP, wantP) {
				t.Errorf("payload\n got %s\nwant %s", b, tt.payload)
			}
			got.Payload, got.ApnsID = nil, ""
			if !reflect.DeepEqual(*got, tt.want) {
				t.Errorf("notification\n got %+v\nwant %+v", *got, tt.want)
			}
		})
	}
}

func TestToNotificationApnsID(t *testing.T) {
	t.Parallel()
	m := notify.OutboundMessage{DeliveryID: "d_1", Address: "tok"}
	a := toNotification(m, "t", time.Now()).ApnsID
	if a == "" || a != toNotification(m, "t", time.Now()).ApnsID {
		t.Errorf("apns-id %q is not stable per delivery", a)
	}
	m.DeliveryID = "d_2"
	if toNotification(m, "t", time.Now()).ApnsID == a {
		t.Error("two deliveries share an apns-id")
	}
	if id := toNotification(notify.OutboundMessage{Address: "tok"}, "t", time.Now()).ApnsID; id != "" {
		t.Errorf("apns-id %q without a delivery id; want APNs to assign one", id)
	}
}

func TestPayloadKey(t *testing.T) {
	t.Parallel()
	base := notify.OutboundMessage{DeliveryID: "d1", Address: "tok1", CollapseID: "c", Priority: notify.PriorityHigh,
		TTL: time.Minute, Content: notify.Content{Title: "T", Body: "B", Data: map[string]string{"a": "1", "b": "2"}}}
	same := base
	same.DeliveryID, same.Address, same.CollapseID, same.TTL, same.Environment = "d2", "tok2", "c2", time.Hour, "sandbox"
	same.Content.Data = map[string]string{"b": "2", "a": "1"}
	if payloadKey(&base) != payloadKey(&same) {
		t.Error("messages differing only in headers got different payload keys")
	}
	change := []func(m *notify.OutboundMessage){
		func(m *notify.OutboundMessage) { m.Content.Title = "T2" },
		func(m *notify.OutboundMessage) { m.Content.Body = "B2" },
		func(m *notify.OutboundMessage) { m.Content.ImageURL = "https://i" },
		func(m *notify.OutboundMessage) { m.Content.Link = "x://l" },
		func(m *notify.OutboundMessage) { m.Priority = notify.PriorityNormal },
		func(m *notify.OutboundMessage) { m.Content.Data = map[string]string{"a": "1"} },
		func(m *notify.OutboundMessage) { m.Content.Data = map[string]string{"a": "1", "b": "3"} },
		func(m *notify.OutboundMessage) { m.Content.Title, m.Content.Body = "TB", "" },
	}
	for i, f := range change {
		m := base
		m.Content.Data = map[string]string{"a": "1", "b": "2"}
		f(&m)
		if payloadKey(&m) == payloadKey(&base) {
			t.Errorf("change %d: same key for a different payload", i)
		}
	}
}
