package alimtalk

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"herald/internal/notify"
)

// The message list: GET /messages/v4/list, Solapi's read of stored messages and their current
// status, what Herald polls for Kakao's late verdicts. What this file follows:
//
//   - Request: the query parameters of Solapi's official Node SDK (MessageService.getMessages),
//     which sends messageIds repeated once per id (messageIds=A&messageIds=B, no brackets) and
//     limit; the API reference (api-reference/messages/getmessagelist in Solapi's documentation
//     repository) documents the single-id form (criteria=messageId&cond=eq&value=…), startKey
//     and limit, and the answer's shape.
//   - Authentication: the same HMAC-SHA256 Authorization header as sending (permission
//     message:read).
//   - Response: {"startKey", "nextKey", "limit", "messageList": {"<messageId>": {"messageId",
//     "groupId", "to", "statusCode", "reason", "customFields", "dateReported", …}}} — the map is
//     keyed by message id; only messageId, statusCode, reason and to are read here.
const ListPath = "/messages/v4/list"

// MaxListBatch is the most message ids one list call asks about: its URL stays a few kilobytes
// (a message id is 32 characters), and the page limit is set to the same count.
const MaxListBatch = 50

// pendingCodes are the status codes of a message Solapi accepted whose final verdict has not
// come yet: 2000 accepted (to be handed to Kakao or the carrier), 3000 handed over, report
// pending. 4000 (received) and every failure code are final.
var pendingCodes = map[string]bool{"2000": true, "3000": true}

// VerdictPending reports whether Solapi status code is "accepted, final verdict pending".
func VerdictPending(code string) bool { return pendingCodes[code] }

// ListQuery is the path and query of the message list call asking about ids: each id once, in
// the order given; limit is the number of ids, so one page holds them all. An empty list, more
// than MaxListBatch ids, or an id that is not a Solapi message id is an EINVALID naming it.
func ListQuery(ids []string) (string, error) {
	switch {
	case len(ids) == 0:
		return "", notify.FieldError("message_ids", "required: at least one Solapi message id")
	case len(ids) > MaxListBatch:
		return "", notify.FieldError("message_ids", "%d ids; one list call takes at most %d", len(ids), MaxListBatch)
	}
	q := url.Values{}
	seen := make(map[string]bool, len(ids))
	for i, id := range ids {
		if !messageIDOK(id) {
			return "", notify.FieldError(fmt.Sprintf("message_ids[%d]", i), "%q is not a Solapi message id", id)
		}
		if !seen[id] {
			seen[id] = true
			q.Add("messageIds", id)
		}
	}
	q.Set("limit", strconv.Itoa(len(seen)))
	return ListPath + "?" + q.Encode(), nil
}

// messageIDOK accepts Solapi's ids (M4V, then the time and random upper-case letters and
// digits): letters and digits only, so nothing can change the meaning of the query.
func messageIDOK(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, r := range id {
		if (r < 'A' || r > 'Z') && (r < 'a' || r > 'z') && (r < '0' || r > '9') {
			return false
		}
	}
	return true
}

// listResponse is the part of the list answer Herald reads.
type listResponse struct {
	MessageList map[string]json.RawMessage `json:"messageList"`
	NextKey     json.RawMessage            `json:"nextKey"` // a string, or null on the last page
}

// listedMessage is one entry of the list. Its "to" is a string or, for a message sent to
// several numbers, an array (Solapi's documents show both): Herald keys on messageId and does
// not read it, so either shape is taken. customFields is what the send carried (Herald's
// delivery id), null or absent for messages sent without.
type listedMessage struct {
	MessageID    string            `json:"messageId"`
	To           json.RawMessage   `json:"to"`
	StatusCode   string            `json:"statusCode"`
	Reason       *string           `json:"reason"`
	CustomFields map[string]string `json:"customFields"`
}

// ListedStatus is one message's status as the list reports it.
type ListedStatus struct {
	MessageID  string
	StatusCode string
	Reason     string // Solapi's text for the status, when it gives one
	DeliveryID string // Herald's delivery id from the message's customFields; "" when it has none
}

// FindQuery is the path and query of the message list call that pages the AlimTalk (ATA)
// messages to one phone number (digits, as sent) created since since: the filters of Solapi's
// official SDKs (to, type, dateType=CREATED, startDate in ISO 8601), MaxFindPage messages a page,
// startKey the previous page's nextKey ("" for the first). It is how a send whose outcome is
// unknown is looked up by its delivery id (customFields) before it is sent again.
func FindQuery(phone string, since time.Time, startKey string) string {
	q := url.Values{}
	q.Set("to", phone)
	q.Set("type", "ATA")
	q.Set("dateType", "CREATED")
	q.Set("startDate", since.UTC().Format(time.RFC3339))
	q.Set("limit", strconv.Itoa(MaxFindPage))
	if startKey != "" {
		q.Set("startKey", startKey)
	}
	return ListPath + "?" + q.Encode()
}

// MaxFindPage is the page size of a FindQuery, and MaxFindPages the most pages one look-up
// reads: 1,000 AlimTalks to one number since the notification was made. A look-up that has not
// found the message by then is inconclusive, and the message is not sent again blind.
const (
	MaxFindPage  = 100
	MaxFindPages = 10
)

// ParseList reads a list answer into the status of each listed message, keyed by message id
// (the messageId field, else the map key). A body that is not the list's JSON is an error: the
// caller cannot tell the verdicts apart, and asks again later. One entry that does not read is
// left out alone — its message reads as not listed yet, so its verdict is asked again — and the
// others keep theirs.
func ParseList(raw []byte) (map[string]ListedStatus, error) {
	got, _, err := ParseListPage(raw)
	return got, err
}

// ParseListPage is ParseList with the key of the next page: "" on the last one (nextKey null,
// absent or empty).
func ParseListPage(raw []byte) (map[string]ListedStatus, string, error) {
	var out listResponse
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&out); err != nil {
		return nil, "", fmt.Errorf("alimtalk list: unreadable answer: %w", err)
	}
	if out.MessageList == nil && !bytes.Contains(raw, []byte(`"messageList"`)) {
		return nil, "", fmt.Errorf("alimtalk list: the answer has no messageList")
	}
	got := make(map[string]ListedStatus, len(out.MessageList))
	for key, entry := range out.MessageList {
		var m listedMessage
		if json.Unmarshal(entry, &m) != nil {
			continue
		}
		id := m.MessageID
		if id == "" {
			id = key
		}
		s := ListedStatus{MessageID: id, StatusCode: strings.TrimSpace(m.StatusCode), DeliveryID: m.CustomFields[customDeliveryID]}
		if m.Reason != nil {
			s.Reason = *m.Reason
		}
		got[id] = s
	}
	var next string
	if len(out.NextKey) > 0 && json.Unmarshal(out.NextKey, &next) != nil {
		return nil, "", fmt.Errorf("alimtalk list: nextKey is not a string: %.40s", out.NextKey)
	}
	return got, next, nil
}

// verdictOf classifies one listed status the way a send answer is classified: pending, sent, or
// the error for its code. A message the list does not hold (yet) is pending.
func verdictOf(s ListedStatus, listed bool, q notify.VerdictQuery) notify.SendResult {
	r := notify.SendResult{DeliveryID: q.DeliveryID, ProviderMessageID: q.ProviderMessageID}
	switch {
	case !listed, s.StatusCode == "", VerdictPending(s.StatusCode):
		r.VerdictPending = true
	case statusCode(s.StatusCode) == "":
	default:
		r.Err = classifyStatus(s.StatusCode, s.Reason, q.DeliveryID, q.Address)
	}
	return r
}
