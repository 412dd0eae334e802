package fcm

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"firebase.google.com/go/v4/messaging"

	"herald/internal/notify"
)

func TestToMessage(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	hour := time.Hour
	long := strings.Repeat("a", 63) + "é" // 65 bytes: the cut must not split é

	tests := []struct {
		name string
		in   notify.OutboundMessage
		want *messaging.Message
	}{
		{
			name: "title and body, empty priority is high",
			in:   notify.OutboundMessage{Address: "tok", Content: notify.Content{Title: "Hi", Body: "There"}},
			want: &messaging.Message{
				Token:        "tok",
				Notification: &messaging.Notification{Title: "Hi", Body: "There"},
				Android:      &messaging.AndroidConfig{Priority: "high"},
				APNS: &messaging.APNSConfig{
					Headers: map[string]string{"apns-priority": "10"},
					Payload: &messaging.APNSPayload{Aps: &messaging.Aps{Sound: "default"}},
				},
			},
		},
		{
			name: "normal priority with ttl and collapse id",
			in: notify.OutboundMessage{Address: "tok", Priority: notify.PriorityNormal, TTL: time.Hour, CollapseID: "n_1",
				Content: notify.Content{Body: "b"}},
			want: &messaging.Message{
				Token:        "tok",
				Notification: &messaging.Notification{Body: "b"},
				Android: &messaging.AndroidConfig{CollapseKey: "n_1", Priority: "normal", TTL: &hour,
					Notification: &messaging.AndroidNotification{Tag: "n_1"}},
				APNS: &messaging.APNSConfig{Headers: map[string]string{
					"apns-priority": "5", "apns-collapse-id": "n_1", "apns-expiration": "1700003600"}},
			},
		},
		{
			name: "collapse id cut to 64 bytes for apns only",
			in:   notify.OutboundMessage{Address: "tok", Priority: notify.PriorityNormal, CollapseID: long, Content: notify.Content{Body: "b"}},
			want: &messaging.Message{
				Token:        "tok",
				Notification: &messaging.Notification{Body: "b"},
				Android: &messaging.AndroidConfig{CollapseKey: long, Priority: "normal",
					Notification: &messaging.AndroidNotification{Tag: long}},
				APNS: &messaging.APNSConfig{Headers: map[string]string{
					"apns-priority": "5", "apns-collapse-id": strings.Repeat("a", 63)}},
			},
		},
		{
			name: "image, data and https link",
			in: notify.OutboundMessage{Address: "tok", Priority: notify.PriorityHigh, Content: notify.Content{
				Title: "T", Body: "B", ImageURL: "https://img.example/x.png", Link: "https://example.com/o/1",
				Data: map[string]string{"order": "1", "link": "overridden"}}},
			want: &messaging.Message{
				Token:        "tok",
				Notification: &messaging.Notification{Title: "T", Body: "B", ImageURL: "https://img.example/x.png"},
				Data:         map[string]string{"order": "1", "link": "https://example.com/o/1"},
				Android:      &messaging.AndroidConfig{Priority: "high"},
				APNS: &messaging.APNSConfig{
					Headers:    map[string]string{"apns-priority": "10"},
					Payload:    &messaging.APNSPayload{Aps: &messaging.Aps{Sound: "default", MutableContent: true}},
					FCMOptions: &messaging.APNSFCMOptions{ImageURL: "https://img.example/x.png"},
				},
				Webpush: &messaging.WebpushConfig{FCMOptions: &messaging.WebpushFCMOptions{Link: "https://example.com/o/1"}},
			},
		},
		{
			name: "app deep link goes in data only",
			in: notify.OutboundMessage{Address: "tok", Priority: notify.PriorityNormal,
				Content: notify.Content{Body: "b", Link: "myapp://orders/1"}},
			want: &messaging.Message{
				Token:        "tok",
				Notification: &messaging.Notification{Body: "b"},
				Data:         map[string]string{"link": "myapp://orders/1"},
				Android:      &messaging.AndroidConfig{Priority: "normal"},
				APNS:         &messaging.APNSConfig{Headers: map[string]string{"apns-priority": "5"}},
			},
		},
		{
			name: "data only",
			in: notify.OutboundMessage{Address: "tok", Priority: notify.PriorityNormal,
				Content: notify.Content{Data: map[string]string{"k": "v"}}},
			want: &messaging.Message{
				Token:   "tok",
				Data:    map[string]string{"k": "v"},
				Android: &messaging.AndroidConfig{Priority: "normal"},
				APNS:    &messaging.APNSConfig{Headers: map[string]string{"apns-priority": "5"}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := toMessage(tt.in, now)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("toMessage:\n got %s\nwant %s", mustJSON(t, got), mustJSON(t, tt.want))
			}
		})
	}
}

func TestToMessageDoesNotAliasData(t *testing.T) {
	t.Parallel()
	data := map[string]string{"k": "v"}
	m := toMessage(notify.OutboundMessage{Address: "tok", Content: notify.Content{Data: data, Link: "x://y"}}, time.Now())
	if _, ok := data["link"]; ok {
		t.Fatal("toMessage wrote the link into the caller's data map")
	}
	if m.Data["k"] != "v" || m.Data["link"] != "x://y" {
		t.Fatalf("data = %v", m.Data)
	}
}

func TestToMulticast(t *testing.T) {
	t.Parallel()
	tmpl := toMessage(notify.OutboundMessage{Address: "first", CollapseID: "c", Content: notify.Content{Title: "T",
		Data: map[string]string{"a": "b"}}}, time.Now())
	mm := toMulticast(tmpl, []string{"t1", "t2"})
	want := &messaging.MulticastMessage{Tokens: []string{"t1", "t2"}, Data: tmpl.Data, Notification: tmpl.Notification,
		Android: tmpl.Android, APNS: tmpl.APNS, Webpush: tmpl.Webpush}
	if !reflect.DeepEqual(mm, want) {
		t.Fatalf("toMulticast = %+v, want %+v", mm, want)
	}
}

func TestPayloadKey(t *testing.T) {
	t.Parallel()
	base := notify.OutboundMessage{DeliveryID: "d1", Address: "tok1", App: "default", CollapseID: "c", Priority: notify.PriorityHigh,
		TTL: time.Minute, Content: notify.Content{Title: "T", Body: "B", Data: map[string]string{"a": "1", "b": "2"}}}
	same := base
	same.DeliveryID, same.Address, same.Channel = "d2", "tok2", notify.ChannelPush
	same.Content.Data = map[string]string{"b": "2", "a": "1"}
	if payloadKey(&base) != payloadKey(&same) {
		t.Error("messages differing only in token and delivery id got different keys")
	}

	change := []func(m *notify.OutboundMessage){
		func(m *notify.OutboundMessage) { m.App = "other" },
		func(m *notify.OutboundMessage) { m.Content.Title = "T2" },
		func(m *notify.OutboundMessage) { m.Content.Body = "B2" },
		func(m *notify.OutboundMessage) { m.Content.ImageURL = "https://i" },
		func(m *notify.OutboundMessage) { m.Content.Link = "x://l" },
		func(m *notify.OutboundMessage) { m.CollapseID = "c2" },
		func(m *notify.OutboundMessage) { m.Priority = notify.PriorityNormal },
		func(m *notify.OutboundMessage) { m.TTL = time.Hour },
		func(m *notify.OutboundMessage) { m.Content.Data = map[string]string{"a": "1"} },
		func(m *notify.OutboundMessage) { m.Content.Data = map[string]string{"a": "1", "b": "3"} },
		// Length prefixes keep field boundaries: "T"+"B" must differ from "TB"+"".
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

func TestGroupByPayload(t *testing.T) {
	t.Parallel()
	a := notify.Content{Title: "A"}
	b := notify.Content{Title: "B"}
	msgs := []notify.OutboundMessage{
		{Address: "1", Content: a}, {Address: "2", Content: b}, {Address: "", Content: a},
		{Address: "3", Content: a}, {Address: "4", Content: b},
	}
	got := groupByPayload(msgs)
	want := [][]int{{0, 3}, {1, 4}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("groupByPayload = %v, want %v", got, want)
	}
}
