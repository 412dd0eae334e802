package local

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"herald/internal/erasure"
	"herald/internal/notify"
)

type erasureResp struct {
	UserHash   string         `json:"user_hash"`
	Status     string         `json:"status"`
	FinishedAt *time.Time     `json:"finished_at"`
	Removed    map[string]int `json:"removed"`
}

// giveEverything gives user every kind of data Herald keeps, and a notification to them alone,
// sent; it returns the notification's id.
func (e *env) giveEverything(user string) string {
	e.t.Helper()
	e.mustDo("PUT", "/v1/users/"+user+"/contacts", map[string]any{"email": user + "+bounce@example.com", "phone": "+821055550123"}, 200)
	e.mustDo("PUT", "/v1/users/"+user+"/devices/fcm-"+user+"-0001", map[string]any{"platform": "fcm"}, 200)
	e.mustDo("PUT", "/v1/users/"+user+"/devices/apns-"+user+"-0001", map[string]any{"platform": "apns"}, 200)
	e.mustDo("PUT", "/v1/users/"+user+"/preferences", map[string]any{"marketing_consent": true}, 200)
	e.upload("erase-list", user, "someone-else")
	id := e.send(notify.SendRequest{Channels: []notify.Channel{"push", "email", "inbox"},
		Content: notify.Content{Title: "Hi " + user, Body: "Your order 4411 has shipped"}, Recipients: []notify.Recipient{{UserID: user}}})
	e.waitFinal(id)
	key := notify.AddressKey(notify.ChannelEmail, user+"+bounce@example.com")
	waitFor(e.t, func() bool { // the sandbox's bounce of the address arrives a moment later
		sup, err := e.rt.Store.Suppressed(context.Background(), []string{key})
		return err == nil && len(sup) == 1
	})
	if len(e.inbox(user)) != 1 {
		e.t.Fatalf("%s has no inbox item", user)
	}
	return id
}

// rowsNaming lists, as "table.column", every stored value of both databases that contains s,
// the audit log aside (its entries about a user are kept for its retention: docs/design/security.md),
// and the rows of the notifications in except.
func (e *env) rowsNaming(s string, except ...string) []string {
	e.t.Helper()
	var found []string
	for _, db := range []*sql.DB{e.rt.storeDB.R, e.rt.queueDB.R} {
		tables, err := db.Query(`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'`)
		if err != nil {
			e.t.Fatal(err)
		}
		var names []string
		for tables.Next() {
			var n string
			if err := tables.Scan(&n); err != nil {
				e.t.Fatal(err)
			}
			names = append(names, n)
		}
		tables.Close()
		for _, table := range names {
			if table == "audit_log" {
				continue
			}
			rows, err := db.Query(`SELECT * FROM "` + table + `"`)
			if err != nil {
				e.t.Fatal(err)
			}
			cols, _ := rows.Columns()
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
		row:
			for rows.Next() {
				if err := rows.Scan(ptrs...); err != nil {
					e.t.Fatal(err)
				}
				for _, v := range vals {
					if id, ok := v.(string); ok && slices.Contains(except, id) {
						continue row
					}
				}
				for i, v := range vals {
					var text string
					switch v := v.(type) {
					case string:
						text = v
					case []byte:
						text = string(v)
					}
					if strings.Contains(text, s) {
						found = append(found, table+"."+cols[i])
					}
				}
			}
			rows.Close()
		}
	}
	return found
}

// checkErased checks what an erasure of user leaves: nothing naming them outside the audit log,
// the notification sent to them counted under their hash, their address suppressed by its hash.
func (e *env) checkErased(user, sent string, except ...string) {
	t := e.t
	t.Helper()
	if left := e.rowsNaming(user, except...); len(left) > 0 {
		t.Errorf("after the erasure, %s is still named in %v", user, left)
	}
	var devices struct{ Devices []notify.Device }
	e.mustDo("GET", "/v1/users/"+user+"/devices", nil, 200)
	e.do("GET", "/v1/users/"+user+"/devices", nil, &devices)
	if len(devices.Devices) != 0 || len(e.inbox(user)) != 0 {
		t.Errorf("after the erasure: devices %v, inbox %v", devices.Devices, e.inbox(user))
	}
	var contacts map[string]any
	if code := e.do("GET", "/v1/users/"+user+"/contacts", nil, &contacts); code != 404 {
		t.Errorf("contacts after the erasure = %d %v, want 404", code, contacts)
	}
	hash := notify.UserHash(user)
	rs, err := e.rt.Store.GetRecipients(context.Background(), sent, 0, 10)
	if err != nil || len(rs) != 1 || rs[0].UserID != hash {
		t.Errorf("recipients of the notification sent = %+v, %v; want the hash", rs, err)
	}
	st := e.waitFinal(sent)
	if len(st.Deliveries) != 4 { // two phones, the email, the inbox
		t.Errorf("the notification sent lost deliveries: %+v", st.Deliveries)
	}
	for _, d := range st.Deliveries {
		if d.Address != "" || d.Detail != "" {
			t.Errorf("delivery kept its address: %+v", d)
		}
	}
	sup, err := e.rt.Store.Suppressed(context.Background(), []string{notify.AddressKey(notify.ChannelEmail, user+"+bounce@example.com")})
	if err != nil || len(sup) != 1 {
		t.Errorf("the bounced address is no longer suppressed: %v %v", sup, err)
	}
	var audit struct {
		Entries []notify.AuditEntry `json:"entries"`
	}
	e.do("GET", "/v1/admin/audit?action=user.erase", nil, &audit)
	n := 0
	for _, a := range audit.Entries {
		if a.TargetID == hash {
			n++
		}
	}
	if n != 1 {
		t.Errorf("audit entries of the erasure of %s: %d, want 1 (%+v)", user, n, audit.Entries)
	}
}

// TestEraseUser is the erasure end to end on the local runtime: a user with every kind of data
// is erased through the API; nothing naming them is left but the audit log; a notification
// still in flight is skipped as erased; a send afterwards finds no address.
func TestEraseUser(t *testing.T) {
	t.Parallel()
	e := startExportEnv(t)
	sent := e.giveEverything("erin-7d1")
	e.giveEverything("stays-7d1")

	// In flight: accepted before the erasure, held in the paused ingest queue until after it.
	e.mustDo("POST", "/v1/admin/queues/ingest-demo/pause", nil, 200)
	inflight := e.send(notify.SendRequest{Channels: []notify.Channel{"push", "inbox"},
		Content: notify.Content{Body: "still on its way"}, Recipients: []notify.Recipient{{UserID: "erin-7d1"}}})

	var er erasureResp
	if code := e.do("DELETE", "/v1/users/erin-7d1", nil, &er); code != 200 || er.Status != "erased" || er.UserHash != notify.UserHash("erin-7d1") {
		t.Fatalf("DELETE /v1/users/erin-7d1 = %d %+v", code, er)
	}
	for step, want := range map[string]int{"devices": 2, "contact": 1, "preferences": 1, "inbox": 1, "list_members": 1, "notifications": 1, "suppressions": 1} {
		if er.Removed[step] != want {
			t.Errorf("removed %s = %d, want %d (%v)", step, er.Removed[step], want, er.Removed)
		}
	}
	e.mustDo("POST", "/v1/admin/queues/ingest-demo/resume", nil, 200)
	st := e.waitFinal(inflight)
	for _, d := range st.Deliveries {
		if d.Status != "SKIPPED" || d.Reason != notify.ReasonErased {
			t.Errorf("a delivery in flight at the erasure: %+v, want skipped as erased", d)
		}
	}
	if got := e.deliveredTo("fcm-erin-7d1-0001"); got != 1 {
		t.Errorf("the erased user's phone got %d pushes, want the one sent before", got)
	}
	// The notification in flight was stored after the erasure: it names the user, though it sent
	// them nothing (not yet rewritten under the hash; see the erasure's gaps in
	// docs/design/security.md).
	e.checkErased("erin-7d1", sent, inflight)
	if left := e.rowsNaming("stays-7d1"); len(left) == 0 {
		t.Error("the other user's data went too")
	}

	// A send afterwards finds nothing to send to.
	after := e.waitFinal(e.send(notify.SendRequest{Channels: []notify.Channel{"push"},
		Content: notify.Content{Body: "anyone there?"}, Recipients: []notify.Recipient{{UserID: "erin-7d1"}}}))
	if len(after.Deliveries) != 1 || after.Deliveries[0].Reason != notify.ReasonNoAddress {
		t.Errorf("a send after the erasure: %+v, want skipped with no_address", after.Deliveries)
	}
	var got erasureResp
	if code := e.do("GET", "/v1/users/erin-7d1/erasure", nil, &got); code != 200 || got.Status != "erased" || got.FinishedAt == nil {
		t.Errorf("GET erasure = %d %+v", code, got)
	}
	if code := e.do("GET", "/v1/users/never-here/erasure", nil, nil); code != 404 {
		t.Errorf("GET the erasure of a user never erased = %d, want 404", code)
	}
}

// crashAt is an erasure store that fails at a step, as a process killed there would stop.
type crashAt struct {
	notify.ErasureStore
	step string
}

func (c crashAt) EraseStep(ctx context.Context, user, step, cursor string) (int, string, error) {
	if step == c.step {
		return 0, "", fmt.Errorf("killed in step %s", step)
	}
	return c.ErasureStore.EraseStep(ctx, user, step, cursor)
}

// TestEraseUserResumedAfterACrash stops an erasure half way, then asks again through the API:
// it goes on from its checkpoint and ends as one run does.
func TestEraseUserResumedAfterACrash(t *testing.T) {
	t.Parallel()
	e := startExportEnv(t)
	sent := e.giveEverything("cara-7d1")
	crashed := &erasure.Eraser{Store: crashAt{e.rt.Store, notify.EraseInbox}}
	if _, err := crashed.Erase(context.Background(), "cara-7d1", "demo", time.Minute); err == nil {
		t.Fatal("the crashing erasure did not stop")
	}
	half, err := e.rt.Store.GetErasure(context.Background(), notify.UserHash("cara-7d1"))
	if err != nil || half.Status != notify.ErasureRunning || notify.ErasureSteps[half.Step] != notify.EraseInbox {
		t.Fatalf("after the crash: %+v %v; want it running, at the inbox step", half, err)
	}
	var er erasureResp
	if code := e.do("DELETE", "/v1/users/cara-7d1", nil, &er); code != 200 || er.Status != "erased" {
		t.Fatalf("DELETE after the crash = %d %+v", code, er)
	}
	if er.Removed["devices"] != 2 || er.Removed["inbox"] != 1 {
		t.Errorf("the resumed erasure's counts: %v", er.Removed)
	}
	e.checkErased("cara-7d1", sent)
}
