package herald

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
)

// openAPIPath is the OpenAPI document of the Herald this client is released with.
const openAPIPath = "../../internal/api/openapi.json"

// TestTypesMatchOpenAPI checks every type against its schema, both ways: each JSON field of the
// type is a property of the schema, and each property of the schema is a field of the type; a
// property the schema requires of a request is never left out of it (no omitempty). So the
// client cannot drift from the API it speaks.
func TestTypesMatchOpenAPI(t *testing.T) {
	raw, err := os.ReadFile(openAPIPath)
	if err != nil {
		t.Fatalf("the OpenAPI document beside this client: %v", err)
	}
	var doc struct {
		Components struct {
			Schemas map[string]schema `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	schemas := doc.Components.Schemas
	types := map[string]any{
		"SendRequest": SendRequest{}, "Content": Content{}, "Recipient": Recipient{}, "TemplateRef": TemplateRef{},
		"Accepted": Accepted{}, "CampaignRequest": CampaignRequest{}, "QuietHours": QuietHours{},
		"CampaignAccepted": CampaignAccepted{}, "DeviceRequest": DeviceRequest{}, "Device": Device{}, "DeviceList": DeviceList{},
		"ContactsRequest": ContactsRequest{}, "Contacts": Contacts{}, "PreferencesRequest": PreferencesRequest{},
		"Preferences": Preferences{}, "WebPushSubscriptionRequest": WebPushSubscriptionRequest{},
		"WebPushSubscription": WebPushSubscription{}, "WebPushSubscriptionList": WebPushSubscriptionList{},
		"TemplateRequest": TemplateRequest{}, "TemplateVariable": TemplateVariable{}, "Template": Template{},
		"Notification": Notification{}, "ChannelStats": ChannelStats{}, "Delivery": Delivery{},
		"InboxItem": InboxItem{}, "InboxPage": InboxPage{},
	}
	nested := map[string]struct {
		v    any
		path []string
	}{
		"CampaignRequest.audience":         {Audience{}, []string{"audience"}},
		"CampaignRequest.audience.sources": {AudienceSource{}, []string{"audience", "sources", "[]"}},
		"WebPushSubscriptionRequest.keys":  {WebPushKeys{}, []string{"keys"}},
	}
	for name, v := range types {
		s, ok := schemas[name]
		if !ok {
			t.Errorf("%s: no such schema", name)
			continue
		}
		compare(t, name, reflect.TypeOf(v), s, strings.HasSuffix(name, "Request"))
	}
	for name, n := range nested {
		root, _, _ := strings.Cut(name, ".")
		s := schemas[root]
		for _, p := range n.path {
			if p == "[]" {
				s = *s.Items
				continue
			}
			s = s.Properties[p]
		}
		compare(t, name, reflect.TypeOf(n.v), s, true)
	}
}

type schema struct {
	Properties map[string]schema `json:"properties"`
	Required   []string          `json:"required"`
	Items      *schema           `json:"items"`
}

func compare(t *testing.T, name string, typ reflect.Type, s schema, request bool) {
	t.Helper()
	fields := map[string]bool{} // name → omitempty
	for i := range typ.NumField() {
		tag := typ.Field(i).Tag.Get("json")
		n, opts, _ := strings.Cut(tag, ",")
		if n == "-" || n == "" {
			continue
		}
		fields[n] = strings.Contains(opts, "omitempty")
		if _, ok := s.Properties[n]; !ok {
			t.Errorf("%s.%s: the schema has no such property", name, n)
		}
	}
	for p := range s.Properties {
		if _, ok := fields[p]; !ok {
			t.Errorf("%s: the schema's property %q is missing from %s", name, p, typ.Name())
		}
	}
	if request {
		for _, r := range s.Required {
			if fields[r] {
				t.Errorf("%s.%s is required by the schema but omitted when empty", name, r)
			}
		}
	}
}
