package local

import (
	"net/http"
	"testing"
)

// A send by template renders the stored text: the sandbox providers and the inbox get it with the
// data filled in (HTML escaped in the email's html only), and the notification names the template
// and version it came from. A send missing a variable is refused before anything is queued.
func TestSendByTemplateEndToEnd(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.mustDo("PUT", "/v1/users/alice/devices/fcm-alice-phone-0002", map[string]any{"platform": "fcm"}, 200)
	e.mustDo("PUT", "/v1/users/alice/contacts", map[string]any{"email": "alice@example.com", "phone": "+821012345679"}, 200)
	tmpl := map[string]any{
		"channels": map[string]any{
			"push":  map[string]any{"title": "Order {{order_id}}", "body": "{{name}}, order {{order_id}} shipped"},
			"sms":   map[string]any{"body": "[Shop] {{name}}: order {{order_id}} shipped"},
			"inbox": map[string]any{"title": "Order {{order_id}} shipped", "body": "Track it in the app, {{name}}"},
			"email": map[string]any{"title": "Order {{order_id}} shipped", "body": "Hi {{name}}", "html": "<p>Hi {{name}}</p>"},
		},
		"variables": []map[string]any{{"name": "order_id"}, {"name": "name"}},
	}
	e.mustDo("PUT", "/v1/templates/order-shipped", map[string]any{"channels": map[string]any{"push": map[string]any{"body": "old"}}}, http.StatusCreated)
	var stored struct {
		Version int `json:"version"`
	}
	if code := e.do("PUT", "/v1/templates/order-shipped", tmpl, &stored); code != http.StatusCreated || stored.Version != 2 {
		t.Fatalf("second put = %d, version %d; want 201, 2", code, stored.Version)
	}

	var acc struct {
		ID string `json:"id"`
	}
	code := e.do("POST", "/v1/notifications", map[string]any{
		"channels":   []string{"push", "email", "sms", "inbox"},
		"template":   map[string]any{"name": "order-shipped", "data": map[string]any{"order_id": 1001, "name": "Tom & Jerry"}},
		"recipients": []map[string]any{{"user_id": "alice"}},
	}, &acc)
	if code != http.StatusAccepted {
		t.Fatalf("send = %d", code)
	}
	st := e.waitFinal(acc.ID)
	if st.Status != "SENT" {
		t.Fatalf("status %s, deliveries %+v", st.Status, st.Deliveries)
	}
	var view struct {
		TemplateName    string `json:"template_name"`
		TemplateVersion int    `json:"template_version"`
	}
	e.do("GET", "/v1/notifications/"+acc.ID, nil, &view)
	if view.TemplateName != "order-shipped" || view.TemplateVersion != 2 {
		t.Fatalf("notification names template %q v%d, want order-shipped v2", view.TemplateName, view.TemplateVersion)
	}

	push := e.rt.Sandbox.Recorder.List("fcm", "fcm-alice-phone-0002")
	if len(push) != 1 || push[0].Title != "Order 1001" || push[0].Body != "Tom & Jerry, order 1001 shipped" {
		t.Fatalf("fcm got %+v", push)
	}
	sms := e.rt.Sandbox.Recorder.List("twilio", "+821012345679")
	if len(sms) != 1 || sms[0].Body != "[Shop] Tom & Jerry: order 1001 shipped" {
		t.Fatalf("twilio got %+v", sms)
	}
	mail := e.rt.Sandbox.Recorder.List("ses", "alice@example.com")
	if len(mail) != 1 || mail[0].Title != "Order 1001 shipped" || mail[0].Body != "Hi Tom & Jerry" || mail[0].Data["html"] != "<p>Hi Tom &amp; Jerry</p>" {
		t.Fatalf("ses got %+v", mail)
	}
	var inbox struct {
		Items []struct {
			ID    string `json:"id"`
			Title string `json:"title"`
			Body  string `json:"body"`
		} `json:"items"`
	}
	e.do("GET", "/v1/users/alice/inbox", nil, &inbox)
	if len(inbox.Items) != 1 || inbox.Items[0].ID != acc.ID || inbox.Items[0].Title != "Order 1001 shipped" || inbox.Items[0].Body != "Track it in the app, Tom & Jerry" {
		t.Fatalf("inbox = %+v", inbox.Items)
	}

	// A keyed templated send retried is the same notification; the key with other data is a
	// different request (the fingerprint is of the request as sent, not of its rendering).
	keyed := func(order int) map[string]any {
		return map[string]any{
			"idempotency_key": "shipped-1001",
			"channels":        []string{"inbox"},
			"template":        map[string]any{"name": "order-shipped", "version": 2, "data": map[string]any{"order_id": order, "name": "Tom"}},
			"recipients":      []map[string]any{{"user_id": "alice"}},
		}
	}
	var first, again struct {
		ID string `json:"id"`
	}
	if code := e.do("POST", "/v1/notifications", keyed(1001), &first); code != http.StatusAccepted {
		t.Fatalf("keyed send = %d", code)
	}
	e.waitFinal(first.ID)
	if code := e.do("POST", "/v1/notifications", keyed(1001), &again); code != http.StatusOK || again.ID != first.ID {
		t.Fatalf("retry = %d %s, want 200 %s", code, again.ID, first.ID)
	}
	if code := e.do("POST", "/v1/notifications", keyed(1002), nil); code != http.StatusConflict {
		t.Fatalf("the key with other data = %d, want 409", code)
	}

	var refused struct {
		Error struct {
			Field string `json:"field"`
		} `json:"error"`
	}
	code = e.do("POST", "/v1/notifications", map[string]any{
		"channels":   []string{"push"},
		"template":   map[string]any{"name": "order-shipped", "data": map[string]any{"name": "Tom"}},
		"recipients": []map[string]any{{"user_id": "alice"}},
	}, &refused)
	if code != http.StatusBadRequest || refused.Error.Field != "template.data.order_id" {
		t.Fatalf("send without order_id = %d naming %q, want 400 naming template.data.order_id", code, refused.Error.Field)
	}
}
