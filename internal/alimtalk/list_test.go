package alimtalk

import (
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"herald/internal/notify"
)

func TestListQuery(t *testing.T) {
	t.Parallel()
	const a, b = "M4V20261201180000ABCDEFGHIJKLMNO", "M4V20261201180001PQRSTUVWXYZ0123"
	many := make([]string, MaxListBatch+1)
	for i := range many {
		many[i] = a
	}
	tests := []struct {
		name  string
		ids   []string
		want  url.Values // the query, when valid
		field string     // the field an invalid call names
	}{
		{"one id", []string{a}, url.Values{"messageIds": {a}, "limit": {"1"}}, ""},
		{"ids repeated once each, in order", []string{b, a, b}, url.Values{"messageIds": {b, a}, "limit": {"2"}}, ""},
		{"none", nil, nil, "message_ids"},
		{"too many", many, nil, "message_ids"},
		{"not an id", []string{a, "M4V&limit=1"}, nil, "message_ids[1]"},
		{"empty id", []string{""}, nil, "message_ids[0]"},
	}
	for _, tt := range tests {
		got, err := ListQuery(tt.ids)
		if tt.field != "" {
			var fe *notify.Error
			if err == nil || !notify.IsCode(err, notify.EINVALID) || !asError(err, &fe) || fe.Field != tt.field {
				t.Errorf("%s: %q, %v; want EINVALID naming %s", tt.name, got, err, tt.field)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		path, query, _ := strings.Cut(got, "?")
		q, perr := url.ParseQuery(query)
		if path != ListPath || perr != nil || q.Encode() != tt.want.Encode() {
			t.Errorf("%s: %s, want %s?%s", tt.name, got, ListPath, tt.want.Encode())
		}
		if strings.Contains(query, "%5B") || strings.Contains(query, "[") {
			t.Errorf("%s: %s: the SDKs send messageIds without brackets", tt.name, got)
		}
	}
}

func TestParseListAndVerdicts(t *testing.T) {
	t.Parallel()
	// The shape of Solapi's answer (its API reference's sample, with the fields Herald reads).
	raw := []byte(`{"startKey": null, "nextKey": null, "limit": 5, "messageList": {
	  "M4VDELIVERED": {"_id": "M4VDELIVERED", "messageId": "M4VDELIVERED", "groupId": "G4V1", "to": "01012345678", "statusCode": "4000", "reason": null, "customFields": {"heraldDeliveryId": "d_1"}},
	  "M4VACCEPTED": {"messageId": "M4VACCEPTED", "to": "01012345679", "statusCode": "2000", "reason": null},
	  "M4VHANDED": {"messageId": "M4VHANDED", "to": "01012345670", "statusCode": "3000"},
	  "M4VNOTKAKAO": {"messageId": "M4VNOTKAKAO", "to": "01055550011", "statusCode": "3104", "reason": "카카오톡 미사용자"},
	  "M4VBLOCKED": {"to": "01055550012", "statusCode": "3107", "reason": "알림톡 차단"},
	  "M4VOFF": {"messageId": "M4VOFF", "to": "01012340000", "statusCode": "3043", "reason": "단말기 전원 꺼짐"},
	  "M4VMISMATCH": {"messageId": "M4VMISMATCH", "to": "01012340001", "statusCode": "3103", "reason": "템플릿 불일치"}}}`)
	listed, err := ParseList(raw)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		id, phone string
		pending   bool
		code      string // "" sent
	}{
		{"M4VDELIVERED", "+821012345678", false, ""},
		{"M4VACCEPTED", "01012345679", true, ""},
		{"M4VHANDED", "01012345670", true, ""},
		{"M4VNOTKAKAO", "+821055550011", false, notify.EUNREACHABLE},
		{"M4VBLOCKED", "010-5555-0012", false, notify.EUNREACHABLE}, // keyed by the map key
		{"M4VOFF", "01012340000", false, notify.EUNAVAILABLE},
		{"M4VMISMATCH", "01012340001", false, notify.EREJECTED},
		{"M4VNOTLISTED", "01012340002", true, ""}, // not in the list (yet)
	}
	for _, tt := range tests {
		st, ok := listed[tt.id]
		r := verdictOf(st, ok, notify.VerdictQuery{DeliveryID: "d_" + tt.id, ProviderMessageID: tt.id, Address: tt.phone})
		if r.DeliveryID != "d_"+tt.id || r.ProviderMessageID != tt.id || r.VerdictPending != tt.pending || notify.ErrorCode(r.Err) != tt.code {
			t.Errorf("%s: %+v, want pending %v, code %q", tt.id, r, tt.pending, tt.code)
			continue
		}
		if r.Err != nil {
			msg := r.Err.Error()
			if !strings.Contains(msg, st.StatusCode) || strings.Contains(msg, strings.TrimPrefix(tt.phone, "+82")) || strings.Contains(msg, listedTo(raw, tt.id)) {
				t.Errorf("%s: error %q: want its code, no phone", tt.id, msg)
			}
		}
	}

	for _, bad := range []string{``, `[]`, `{"errorCode": "x"}`, `{"messageList": 3}`, `<html>`} {
		if _, err := ParseList([]byte(bad)); err == nil {
			t.Errorf("ParseList(%q): no error", bad)
		}
	}
	if got, err := ParseList([]byte(`{"messageList": {}}`)); err != nil || len(got) != 0 {
		t.Errorf("empty list: %v, %v", got, err)
	}
}

// listedTo is the "to" the raw answer lists for id (the national writing Solapi echoes).
func listedTo(raw []byte, id string) string {
	s := string(raw)
	i := strings.Index(s, `"`+id+`": {`)
	if i < 0 {
		return "\x00"
	}
	s = s[i:]
	j := strings.Index(s, `"to": "`)
	if j < 0 {
		return "\x00"
	}
	s = s[j+len(`"to": "`):]
	return s[:strings.Index(s, `"`)]
}

// TestParseListTakesToAsStringOrArray: Solapi's list answers "to" as a string or an array, and
// one entry that does not read leaves the others' statuses alone.
func TestParseListTakesToAsStringOrArray(t *testing.T) {
	raw := []byte(`{"messageList":{
		"M4V1":{"messageId":"M4V1","to":"01012345678","statusCode":"4000"},
		"M4V2":{"messageId":"M4V2","to":["01012345678","01098765432"],"statusCode":"3104","reason":"카카오톡 미사용자"},
		"M4V3":{"messageId":"M4V3","to":"01011112222","statusCode":4000},
		"M4V4":"not an entry"}}`)
	got, err := ParseList(raw)
	if err != nil {
		t.Fatal(err)
	}
	if got["M4V1"].StatusCode != "4000" || got["M4V2"].StatusCode != "3104" || got["M4V2"].Reason != "카카오톡 미사용자" {
		t.Fatalf("parsed %+v", got)
	}
	if _, ok := got["M4V3"]; ok {
		t.Errorf("an entry with a numeric statusCode read as %+v; want it left out (asked again)", got["M4V3"])
	}
	if len(got) != 2 {
		t.Fatalf("%d entries, want the 2 that read", len(got))
	}
}

// TestFindQuery: the look-up's filters are the ones Solapi's official SDKs send for
// getMessages (to, type, dateType, startDate in ISO 8601, limit, startKey).
func TestFindQuery(t *testing.T) {
	t.Parallel()
	since := time.Date(2026, 12, 1, 18, 0, 0, 0, time.FixedZone("KST", 9*3600))
	for _, key := range []string{"", "M4V20261201180001PQRSTUVWXYZ0123"} {
		path, raw, _ := strings.Cut(FindQuery("01012345678", since, key), "?")
		q, err := url.ParseQuery(raw)
		if path != ListPath || err != nil {
			t.Fatalf("FindQuery = %s?%s (%v)", path, raw, err)
		}
		want := url.Values{"to": {"01012345678"}, "type": {"ATA"}, "dateType": {"CREATED"},
			"startDate": {"2026-12-01T09:00:00Z"}, "limit": {strconv.Itoa(MaxFindPage)}}
		if key != "" {
			want["startKey"] = []string{key}
		}
		if q.Encode() != want.Encode() {
			t.Errorf("FindQuery(startKey %q) = %s, want %s", key, q.Encode(), want.Encode())
		}
	}
}

// TestParseListPage: the delivery id comes from customFields, the next page's key from nextKey
// (null on the last page), and a nextKey that is not a string makes the page unreadable.
func TestParseListPage(t *testing.T) {
	t.Parallel()
	got, next, err := ParseListPage([]byte(`{"startKey": null, "nextKey": "M4VB", "limit": 2, "messageList": {
	  "M4VA": {"messageId": "M4VA", "to": "01012340001", "statusCode": "4000", "customFields": {"heraldDeliveryId": "d_1"}},
	  "M4VC": {"messageId": "M4VC", "to": ["01012340001"], "statusCode": "2000", "customFields": null}}}`))
	if err != nil || next != "M4VB" || got["M4VA"].DeliveryID != "d_1" || got["M4VC"].DeliveryID != "" || len(got) != 2 {
		t.Fatalf("ParseListPage = %+v, %q, %v", got, next, err)
	}
	if _, next, err := ParseListPage([]byte(`{"nextKey": null, "messageList": {}}`)); err != nil || next != "" {
		t.Fatalf("last page: next %q, %v", next, err)
	}
	if _, _, err := ParseListPage([]byte(`{"nextKey": 7, "messageList": {}}`)); err == nil {
		t.Fatal("a numeric nextKey read")
	}
}
