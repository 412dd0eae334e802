package local

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"herald/internal/config"
	"herald/internal/notify"
)

// TestExportOfDeliveries: an export of a notification's deliveries goes PENDING → DONE; its link
// downloads a CSV with one row per delivery and masked addresses; the same link after its expiry,
// or altered, answers 403. Creating and downloading it are in GET /v1/admin/audit with actor and
// target, and no audit entry holds a raw address.
func TestExportOfDeliveries(t *testing.T) {
	t.Parallel()
	cfg := config.Dev()
	logs := &syncBuffer{}
	dir := t.TempDir()
	rt, err := Start(context.Background(), Options{Config: cfg, DataDir: dir, Addr: "127.0.0.1:0",
		Logger: slog.New(slog.NewJSONHandler(logs, nil)), ExportLinkTTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := rt.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	e := &env{t: t, rt: rt, log: logs}
	const (
		email = "export-alice@example.com"
		phone = "+821012345678"
		token = "fcm-export-alice-token-0001"
	)
	e.mustDo("PUT", "/v1/users/alice/contacts", map[string]any{"email": email, "phone": phone}, 200)
	e.mustDo("PUT", "/v1/users/alice/devices/"+token, map[string]any{"platform": "fcm"}, 200)
	id := e.send(notify.SendRequest{IdempotencyKey: "export-1", Channels: []notify.Channel{"push", "email", "sms"},
		Content: notify.Content{Title: "Hi", Body: "Hello"}, Recipients: []notify.Recipient{{UserID: "alice"}}})
	st := e.waitFinal(id)
	if len(st.Deliveries) != 3 {
		t.Fatalf("deliveries %+v, want 3", st.Deliveries)
	}

	// Refused requests name their field.
	for _, c := range []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"kind": "deliveries"}, "notification_id"},
		{map[string]any{"kind": "nope", "notification_id": id}, "kind"},
		{map[string]any{"kind": "audit", "unmasked": true}, "unmasked"},
		{map[string]any{"kind": "deliveries", "notification_id": id, "format": "xml"}, "format"},
		{map[string]any{"kind": "deliveries", "notification_id": "n_unknown"}, "notification_id"},
	} {
		var er struct {
			Error struct{ Field string } `json:"error"`
		}
		if code := e.do("POST", "/v1/admin/exports", c.body, &er); code != 400 || er.Error.Field != c.field {
			t.Errorf("POST %v = %d field %q, want 400 %q", c.body, code, er.Error.Field, c.field)
		}
	}

	var job struct {
		ID                string    `json:"id"`
		Status            string    `json:"status"`
		Rows              int64     `json:"rows"`
		DownloadURL       string    `json:"download_url"`
		DownloadExpiresAt time.Time `json:"download_expires_at"`
	}
	if code := e.do("POST", "/v1/admin/exports", map[string]any{"kind": "deliveries", "notification_id": id}, &job); code != 202 || job.Status != "PENDING" {
		t.Fatalf("POST /v1/admin/exports = %d %+v", code, job)
	}
	xid := job.ID
	waitFor(t, func() bool {
		e.do("GET", "/v1/admin/exports/"+xid, nil, &job)
		return job.Status == "DONE"
	})
	if job.Rows != 3 || job.DownloadURL == "" {
		t.Fatalf("done job %+v", job)
	}
	if n, _ := filepath.Glob(filepath.Join(dir, "exports", "*.part-*")); len(n) != 0 {
		t.Errorf("temporary files left: %v", n)
	}

	get := func(link string) (int, string) {
		t.Helper()
		res, err := http.Get(link)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	code, body := get(job.DownloadURL)
	if code != 200 {
		t.Fatalf("download = %d %s", code, body)
	}
	recs, err := csv.NewReader(strings.NewReader(body)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 4 || recs[0][0] != "delivery_id" || recs[0][6] != "address" {
		t.Fatalf("csv %q, want a header and 3 rows", recs)
	}
	for _, raw := range []string{email, phone, token} {
		if strings.Contains(body, raw) {
			t.Errorf("the file holds %s unmasked:\n%s", raw, body)
		}
	}
	if !strings.Contains(body, notify.MaskEmail(email)) || !strings.Contains(body, notify.MaskPhone(phone)) {
		t.Errorf("the file lacks the masked addresses:\n%s", body)
	}
	if code, _ := get(strings.Replace(job.DownloadURL, "expires=", "expires=1", 1)); code != 403 {
		t.Errorf("altered link = %d, want 403", code)
	}
	if code, _ := get(strings.Replace(job.DownloadURL, xid, notify.NewID("x_", time.Now()), 1)); code != 403 {
		t.Errorf("link to another export = %d, want 403", code)
	}
	time.Sleep(time.Until(job.DownloadExpiresAt) + 100*time.Millisecond)
	if code, _ := get(job.DownloadURL); code != 403 {
		t.Errorf("expired link = %d, want 403", code)
	}

	raw := e.auditJSON("?target_id=" + xid)
	var page struct {
		Entries []notify.AuditEntry `json:"entries"`
	}
	if err := json.Unmarshal(raw, &page); err != nil {
		t.Fatal(err)
	}
	actions := map[notify.AuditAction]notify.AuditEntry{}
	for _, en := range page.Entries {
		actions[en.Action] = en
	}
	for _, a := range []notify.AuditAction{notify.AuditExportCreate, notify.AuditExportDownload} {
		en, ok := actions[a]
		if !ok || en.Actor != "demo" || en.TargetType != notify.AuditTargetExport || en.TargetID != xid || en.Result != notify.AuditResultOK {
			t.Errorf("%s entry %+v in %s", a, en, raw)
		}
	}
	if p := actions[notify.AuditExportCreate].Params; p["kind"] != "deliveries" || p["notification_id"] != id || p["unmasked"] != "false" {
		t.Errorf("create params %v", p)
	}
	all := string(e.auditJSON(""))
	for _, s := range []string{email, phone, token} {
		if strings.Contains(all, s) {
			t.Errorf("the audit log holds %s", s)
		}
	}

	// Cancel: a DONE export cannot be.
	var er struct {
		Error struct{ Code string } `json:"error"`
	}
	if code := e.do("DELETE", "/v1/admin/exports/"+xid, nil, &er); code != 409 || er.Error.Code != notify.EFINISHED {
		t.Errorf("DELETE done export = %d %+v", code, er)
	}
	if _, err := os.Stat(filepath.Join(dir, "exports", xid+".csv")); err != nil {
		t.Errorf("export file: %v", err)
	}
}

// TestExportOfNotificationsAndSuppressions: a notifications export lists the asking service's
// notifications with their counters; a suppressions export lists the address a bounce
// suppressed, masked; both go PENDING → DONE and download through their links; the job list
// shows them newest first.
func TestExportOfNotificationsAndSuppressions(t *testing.T) {
	t.Parallel()
	e := startExportEnv(t)
	rt := e.rt
	const bounced = "bob+bounce@example.com"
	id := e.send(notify.SendRequest{IdempotencyKey: "export-n-1", Channels: []notify.Channel{"email"},
		Content: notify.Content{Title: "Hi", Body: "Hello"}, Recipients: []notify.Recipient{{Email: bounced}, {Email: "carol@example.com"}}})
	e.waitFinal(id)
	waitFor(t, func() bool {
		page, _, err := rt.Store.ListSuppressions(t.Context(), notify.SuppressionFilter{}, "", 10)
		return err == nil && len(page) == 1
	})

	download := func(body map[string]any) (exportJob, string) { return e.exportFile(body) }
	nj, body := download(map[string]any{"kind": "notifications", "format": "jsonl", "channel": "email"})
	var row map[string]string
	if err := json.Unmarshal([]byte(strings.TrimSpace(body)), &row); err != nil || nj.Rows != 1 {
		t.Fatalf("notifications export (%d rows): %q %v", nj.Rows, body, err)
	}
	if row["id"] != id || row["channels"] != "email" || row["recipients"] != "2" || row["total"] != "2" ||
		row["sent"] == "" || row["lane"] != "realtime" || row["idempotency_key"] != "export-n-1" {
		t.Fatalf("notification row %v", row)
	}
	if _, body := download(map[string]any{"kind": "notifications", "channel": "push"}); strings.Count(body, "\n") != 1 {
		t.Fatalf("a push-only filter exports %q, want the header alone", body)
	}

	sj, body := download(map[string]any{"kind": "suppressions", "channel": "email"})
	recs, err := csv.NewReader(strings.NewReader(body)).ReadAll()
	if err != nil || sj.Rows != 1 || len(recs) != 2 || strings.Join(recs[0], ",") != "address,channel,reason,created_at" ||
		recs[1][0] != notify.MaskEmail(bounced) || recs[1][1] != "email" {
		t.Fatalf("suppressions export %q: %v", body, err)
	}
	if strings.Contains(body, "bob+bounce") || strings.Contains(body, notify.AddressKey(notify.ChannelEmail, bounced)) {
		t.Fatalf("the suppressions export holds the address or its hash: %q", body)
	}

	var list struct {
		Exports []exportJob `json:"exports"`
	}
	if code := e.do("GET", "/v1/admin/exports", nil, &list); code != 200 || len(list.Exports) != 3 || list.Exports[0].ID != sj.ID ||
		list.Exports[2].ID != nj.ID || list.Exports[0].DownloadURL == "" {
		t.Fatalf("GET /v1/admin/exports = %d %+v", code, list)
	}
}

// An unmasked deliveries export adds each delivery's raw address, recovered from the
// notification's recipients and the users' current devices and contacts — a device removed since
// the send is not guessed — and the audit log records that it was unmasked.
func TestExportOfDeliveriesUnmasked(t *testing.T) {
	t.Parallel()
	e := startExportEnv(t)
	const (
		email  = "unmask-alice@example.com"
		phone  = "+821055556666"
		kept   = "fcm-unmask-alice-kept-0001"
		gone   = "fcm-unmask-alice-gone-0002"
		direct = "direct-unmask@example.com"
	)
	e.mustDo("PUT", "/v1/users/alice/contacts", map[string]any{"email": email, "phone": phone}, 200)
	e.mustDo("PUT", "/v1/users/alice/devices/"+kept, map[string]any{"platform": "fcm"}, 200)
	e.mustDo("PUT", "/v1/users/alice/devices/"+gone, map[string]any{"platform": "fcm"}, 200)
	id := e.send(notify.SendRequest{IdempotencyKey: "unmask-1", Channels: []notify.Channel{"push", "email", "sms"},
		Content: notify.Content{Title: "Hi", Body: "Hello"}, Recipients: []notify.Recipient{{UserID: "alice"}, {Email: direct}}})
	if st := e.waitFinal(id); len(st.Deliveries) != 5 {
		t.Fatalf("deliveries %+v, want 5", st.Deliveries)
	}
	e.mustDo("DELETE", "/v1/users/alice/devices/"+gone, nil, 204)

	j, file := e.exportFile(map[string]any{"kind": "deliveries", "notification_id": id, "unmasked": true})
	recs, err := csv.NewReader(strings.NewReader(file)).ReadAll()
	if err != nil || len(recs) != 6 {
		t.Fatalf("csv: %d records, %v", len(recs), err)
	}
	col := map[string]int{}
	for i, h := range recs[0] {
		col[h] = i
	}
	got := map[string]string{} // masked address → raw
	for _, r := range recs[1:] {
		got[r[col["address"]]] = r[col["address_unmasked"]]
	}
	want := map[string]string{
		notify.MaskAddress(notify.ChannelPush, kept): kept, notify.MaskAddress(notify.ChannelPush, gone): "",
		notify.MaskEmail(email): email, notify.MaskPhone(phone): phone, notify.MaskEmail(direct): direct,
	}
	for masked, raw := range want {
		if g, ok := got[masked]; !ok || g != raw {
			t.Errorf("address %s: unmasked %q (listed %v), want %q", masked, g, ok, raw)
		}
	}
	var audit struct {
		Entries []notify.AuditEntry `json:"entries"`
	}
	e.do("GET", "/v1/admin/audit?action=export.create", nil, &audit)
	if len(audit.Entries) != 1 || audit.Entries[0].Params["unmasked"] != "true" || audit.Entries[0].TargetID != j.ID {
		t.Fatalf("audit %+v, want the export recorded unmasked", audit.Entries)
	}
}

// startExportEnv starts a development runtime for an export test, stopped when t ends.
func startExportEnv(t *testing.T) *env {
	t.Helper()
	rt, err := Start(context.Background(), Options{Config: config.Dev(), DataDir: t.TempDir(), Addr: "127.0.0.1:0",
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := rt.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return &env{t: t, rt: rt, log: &syncBuffer{}}
}

type exportJob struct {
	ID          string `json:"id"`
	Kind        string `json:"kind"`
	Status      string `json:"status"`
	Error       string `json:"error"`
	Rows        int64  `json:"rows"`
	DownloadURL string `json:"download_url"`
}

// exportFile asks for an export, waits for it to be DONE and downloads its file.
func (e *env) exportFile(body map[string]any) (exportJob, string) {
	t := e.t
	t.Helper()
	var j exportJob
	if code := e.do("POST", "/v1/admin/exports", body, &j); code != 202 {
		t.Fatalf("POST %v = %d %+v", body, code, j)
	}
	waitFor(t, func() bool {
		e.do("GET", "/v1/admin/exports/"+j.ID, nil, &j)
		return j.Status == "DONE" || j.Status == "FAILED"
	})
	if j.Status != "DONE" {
		t.Fatalf("job %+v", j)
	}
	res, err := http.Get(j.DownloadURL)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 {
		t.Fatalf("download = %d %s", res.StatusCode, b)
	}
	return j, string(b)
}

// TestExportOfAUser: a user's request for their data — everything Herald holds on them, in one
// file behind the same expiring link and audit as every export: devices, the contact decrypted,
// preferences, a suppressed address of theirs (named), the inbox, the notification sent to them,
// and the audit entries about them; another user's data is not in it.
func TestExportOfAUser(t *testing.T) {
	t.Parallel()
	e := startExportEnv(t)
	e.mustDo("PUT", "/v1/users/ana/contacts", map[string]any{"email": "ana+bounce@example.com", "phone": "+821055557777"}, 200)
	e.mustDo("PUT", "/v1/users/ana/devices/fcm-export-ana-0001", map[string]any{"platform": "fcm"}, 200)
	e.mustDo("PUT", "/v1/users/ana/preferences", map[string]any{"marketing_consent": true, "opt_out": map[string]any{"sms": []string{"marketing"}}}, 200)
	e.mustDo("PUT", "/v1/users/bob/devices/fcm-export-bob-0001", map[string]any{"platform": "fcm"}, 200)
	id := e.send(notify.SendRequest{IdempotencyKey: "export-ana-1", Channels: []notify.Channel{"push", "email", "inbox"},
		Content: notify.Content{Title: "Hi", Body: "Hello Ana"}, Recipients: []notify.Recipient{{UserID: "ana"}}})
	e.waitFinal(id)
	key := notify.AddressKey(notify.ChannelEmail, "ana+bounce@example.com")
	waitFor(t, func() bool { // the sandbox's bounce of ana's address arrives a moment later
		sup, err := e.rt.Store.Suppressed(context.Background(), []string{key})
		return err == nil && len(sup) == 1
	})
	_, file := e.exportFile(map[string]any{"kind": "user", "user_id": "ana", "format": "jsonl"})
	records := map[string][]map[string]any{}
	for _, line := range strings.Split(strings.TrimSpace(file), "\n") {
		var row map[string]string
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		var data map[string]any
		if err := json.Unmarshal([]byte(row["data"]), &data); err != nil {
			t.Fatalf("data of %q: %v", line, err)
		}
		records[row["record"]] = append(records[row["record"]], data)
	}
	if strings.Contains(file, "bob") {
		t.Errorf("ana's export holds bob's data:\n%s", file)
	}
	want := map[string]func([]map[string]any) bool{
		"device": func(r []map[string]any) bool { return len(r) == 1 && r[0]["token"] == "fcm-export-ana-0001" },
		"contact": func(r []map[string]any) bool {
			return len(r) == 1 && r[0]["email"] == "ana+bounce@example.com" && r[0]["phone"] == "+821055557777"
		},
		"preferences":  func(r []map[string]any) bool { return len(r) == 1 && r[0]["marketing_consent_at"] != nil },
		"inbox_item":   func(r []map[string]any) bool { return len(r) == 1 && r[0]["body"] == "Hello Ana" },
		"notification": func(r []map[string]any) bool { return len(r) == 1 && r[0]["id"] == id },
		"audit":        func(r []map[string]any) bool { return len(r) >= 2 },
	}
	for record, ok := range want {
		if !ok(records[record]) {
			t.Errorf("%s rows %v", record, records[record])
		}
	}
	if sup := records["suppression"]; len(sup) != 1 || sup[0]["address_unmasked"] != "ana+bounce@example.com" {
		t.Errorf("suppression rows %v, want the address named", sup)
	}
	var bad struct {
		Error struct{ Field string } `json:"error"`
	}
	if code := e.do("POST", "/v1/admin/exports", map[string]any{"kind": "user"}, &bad); code != 400 || bad.Error.Field != "user_id" {
		t.Errorf("a user export without user_id: %d %+v", code, bad)
	}
}
