package pipeline

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"herald/internal/notify"
)

func TestSendMsgFlatIsEncodingJSON(t *testing.T) {
	hold := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	msgs := []sendMsg{
		{NotificationID: "ntf_1", Provider: notify.ProviderFCM, Items: []sendItem{{DeliveryID: "d1", Address: "tok"}}},
		{NotificationID: "ntf_2", Provider: notify.ProviderTwilio, App: "kr", Retry: 3, BatchID: "b-1",
			Items: []sendItem{{DeliveryID: "d1", Address: "+821000000000", Locale: "ko", Environment: "sandbox", UserID: "u<1>", FallbackOf: "d0", Kind: "LMS"}, {DeliveryID: "d2", Address: "é\u2028"}}},
		{NotificationID: "ntf_3", Provider: notify.ProviderFCM, Items: []sendItem{}},
		{NotificationID: "ntf_4", Provider: notify.ProviderFCM},
		{NotificationID: "ntf_5", Provider: notify.ProviderFCM, HoldUntil: &hold, Items: []sendItem{{DeliveryID: "d", Address: "a"}}},
		{NotificationID: "ntf_\"6\"", Provider: notify.ProviderAPNs, Items: []sendItem{{DeliveryID: "d\n", Address: "a\\b"}}},
	}
	readHere := map[string]bool{"ntf_1": true, "ntf_2": false /* é, U+2028: escaped by the writer */, "ntf_3": true,
		"ntf_4": false /* "items":null */, "ntf_5": false /* a time */, "ntf_\"6\"": false}
	for _, m := range msgs {
		want, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := m.appendJSON(nil)
		if ok != (m.HoldUntil == nil) {
			t.Fatalf("%s: wrote itself %v with hold %v", m.NotificationID, ok, m.HoldUntil)
		}
		if ok && string(got) != string(want) {
			t.Fatalf("appendJSON:\n got %s\nwant %s", got, want)
		}
		var viaJSON sendMsg
		if err := json.Unmarshal(want, &viaJSON); err != nil {
			t.Fatal(err)
		}
		flat := sendMsg{Items: make([]sendItem, 0, 4)}
		if flat.decodeFlat(want) {
			if (flat.Items == nil) != (viaJSON.Items == nil) || len(flat.Items) != len(viaJSON.Items) {
				t.Fatalf("%s: items %#v, encoding/json's %#v", m.NotificationID, flat.Items, viaJSON.Items)
			}
			if len(flat.Items) == 0 {
				flat.Items, viaJSON.Items = nil, nil
			}
			if !reflect.DeepEqual(flat, viaJSON) {
				t.Fatalf("decodeFlat:\n got %#v\nwant %#v", flat, viaJSON)
			}
		} else if readHere[m.NotificationID] {
			t.Fatalf("%s: a plain batch was left to encoding/json: %s", m.NotificationID, want)
		}
	}
	// What it does not read it leaves as it was, for encoding/json.
	for _, doc := range []string{`{"notification_id":"n","provider":"fcm","items":[{"id":"d","address":"a","extra":1}]}`,
		`{"notification_id":"n","retry":-1,"items":[]}`, `{"notification_id":"n","items":[]} x`, `{"notification_id":null}`} {
		m := sendMsg{NotificationID: "before"}
		if m.decodeFlat([]byte(doc)) || m.NotificationID != "before" {
			t.Fatalf("%s: read as %#v", doc, m)
		}
	}
}
