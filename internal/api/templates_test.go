package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"herald/internal/notify"
)

func orderTemplateBody(body string) map[string]any {
	return map[string]any{
		"channels": map[string]any{
			"push":  map[string]any{"title": "Order {{order_id}}", "body": body},
			"inbox": map[string]any{"title": "Order {{order_id}}", "body": body},
			"email": map[string]any{"title": "Order {{order_id}}", "html": "<p>Hi {{name}}</p>"},
		},
		"locales":   map[string]any{"ko": map[string]any{"body": "{{name}}님, 주문 {{order_id}} 발송"}},
		"variables": []map[string]any{{"name": "order_id"}, {"name": "name"}, {"name": "coupon", "optional": true}},
	}
}

func putTemplate(t *testing.T, e *env, key, name string, body any) templateView {
	t.Helper()
	rec := e.do(t, "PUT", "/v1/templates/"+name, key, body)
	wantStatus(t, rec, http.StatusCreated)
	wantDocumented(t, "PUT", "/v1/templates/{name}", rec)
	return decodeBody[templateView](t, rec)
}

func TestTemplateStoredTwiceHasTwoVersions(t *testing.T) {
	t.Parallel()
	e := setup(t)
	v1 := putTemplate(t, e, ordersKey, "order.shipped", orderTemplateBody("Order {{order_id}} shipped"))
	v2 := putTemplate(t, e, ordersKey, "order.shipped", orderTemplateBody("Order {{order_id}} is on its way"))
	if v1.Version != 1 || v2.Version != 2 {
		t.Fatalf("versions %d, %d; want 1, 2", v1.Version, v2.Version)
	}

	rec := e.do(t, "GET", "/v1/templates/order.shipped", ordersKey, nil)
	wantStatus(t, rec, http.StatusOK)
	wantDocumented(t, "GET", "/v1/templates/{name}", rec)
	if got := decodeBody[templateView](t, rec); got.Version != 2 || got.Channels[notify.ChannelPush].Body != "Order {{order_id}} is on its way" {
		t.Fatalf("latest = v%d %q", got.Version, got.Channels[notify.ChannelPush].Body)
	}
	rec = e.do(t, "GET", "/v1/templates/order.shipped?version=1", ordersKey, nil)
	wantStatus(t, rec, http.StatusOK)
	if got := decodeBody[templateView](t, rec); got.Version != 1 || got.Channels[notify.ChannelPush].Body != "Order {{order_id}} shipped" ||
		len(got.Variables) != 3 || !got.Variables[2].Optional {
		t.Fatalf("version 1 = %+v", got)
	}
	wantError(t, e.do(t, "GET", "/v1/templates/order.shipped?version=3", ordersKey, nil), http.StatusNotFound, notify.ENOTFOUND, "")
	wantError(t, e.do(t, "GET", "/v1/templates/order.shipped?version=zero", ordersKey, nil), http.StatusBadRequest, notify.EINVALID, "version")
	// Templates belong to the service that stored them.
	rec = e.do(t, "GET", "/v1/templates/order.shipped", billingKey, nil)
	wantError(t, rec, http.StatusNotFound, notify.ENOTFOUND, "")
	wantDocumented(t, "GET", "/v1/templates/{name}", rec)
	rec = e.do(t, "GET", "/v1/templates", billingKey, nil)
	wantStatus(t, rec, http.StatusOK)
	if got := decodeBody[templatePage](t, rec); len(got.Templates) != 0 {
		t.Fatalf("billing lists %d templates", len(got.Templates))
	}
}

func TestTemplatePutValidation(t *testing.T) {
	t.Parallel()
	e := setup(t)
	edit := func(f func(b map[string]any)) map[string]any {
		b := orderTemplateBody("Order {{order_id}}")
		f(b)
		return b
	}
	channel := func(b map[string]any, ch string) map[string]any {
		return b["channels"].(map[string]any)[ch].(map[string]any)
	}
	cases := []struct {
		name, path string
		body       any
		field      string
	}{
		{"syntax error", "x", edit(func(b map[string]any) { channel(b, "email")["html"] = "<p>\n{{#name}}</p>" }), "channels.email.html"},
		{"undeclared variable", "x", edit(func(b map[string]any) { b["locales"] = map[string]any{"ko": map[string]any{"body": "{{who}}"}} }), "locales.ko.body"},
		{"duplicate variable", "x", edit(func(b map[string]any) { b["variables"].([]map[string]any)[2]["name"] = "name" }), "variables[2]"},
		{"unknown field", "x", edit(func(b map[string]any) { b["subject"] = "x" }), "subject"},
		{"bad name", "-x", orderTemplateBody("x"), "name"},
	}
	for _, c := range cases {
		rec := e.do(t, "PUT", "/v1/templates/"+c.path, ordersKey, c.body)
		d := wantError(t, rec, http.StatusBadRequest, notify.EINVALID, c.field)
		if c.name == "syntax error" && !strings.Contains(d.Message, "line 2") {
			t.Errorf("syntax error message %q does not give the line", d.Message)
		}
		wantDocumented(t, "PUT", "/v1/templates/{name}", rec)
	}
}

func TestTemplateListPages(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for _, name := range []string{"a", "b", "c"} {
		putTemplate(t, e, ordersKey, name, orderTemplateBody("x {{order_id}}"))
		e.clock.Advance(1e9)
	}
	var names []string
	path := "/v1/templates?limit=2"
	for range 3 {
		rec := e.do(t, "GET", path, ordersKey, nil)
		wantStatus(t, rec, http.StatusOK)
		wantDocumented(t, "GET", "/v1/templates", rec)
		page := decodeBody[templatePage](t, rec)
		for _, tp := range page.Templates {
			names = append(names, tp.Name)
		}
		if page.NextCursor == "" {
			break
		}
		path = "/v1/templates?limit=2&cursor=" + page.NextCursor
	}
	if strings.Join(names, ",") != "c,b,a" {
		t.Fatalf("listed %v, want newest first [c b a]", names)
	}
	wantError(t, e.do(t, "GET", "/v1/templates?cursor=bogus", ordersKey, nil), http.StatusBadRequest, notify.EINVALID, "cursor")
}

func TestTemplatePreview(t *testing.T) {
	t.Parallel()
	e := setup(t)
	putTemplate(t, e, ordersKey, "shipped", orderTemplateBody("Order {{order_id}} shipped"))
	putTemplate(t, e, ordersKey, "shipped", orderTemplateBody("v2 {{order_id}}"))
	rec := e.do(t, "POST", "/v1/templates/shipped/preview?version=1", ordersKey, map[string]any{"data": map[string]any{"name": "<Tom>"}})
	wantStatus(t, rec, http.StatusOK)
	wantDocumented(t, "POST", "/v1/templates/{name}/preview", rec)
	p := decodeBody[previewView](t, rec)
	if p.Version != 1 || p.Channels[notify.ChannelPush].Body != "Order  shipped" || p.Channels[notify.ChannelEmail].HTML != "<p>Hi &lt;Tom&gt;</p>" ||
		p.Locales["ko"].Body != "<Tom>님, 주문  발송" {
		t.Fatalf("preview = %+v", p)
	}
	if got := p.Missing["channels.push.body"]; len(got) != 1 || got[0] != "order_id" {
		t.Fatalf("missing = %v", p.Missing)
	}
	if _, ok := p.Missing["channels.email.html"]; ok {
		t.Fatalf("email html reported missing: %v", p.Missing)
	}
	wantError(t, e.do(t, "POST", "/v1/templates/nope/preview", ordersKey, map[string]any{}), http.StatusNotFound, notify.ENOTFOUND, "")
}

func templateSend(ref map[string]any) map[string]any {
	return map[string]any{
		"channels":   []string{"push", "inbox"},
		"template":   ref,
		"recipients": []map[string]any{{"user_id": "u1"}},
	}
}

func TestSendByTemplateRendersBeforeQueueing(t *testing.T) {
	t.Parallel()
	e := setup(t)
	putTemplate(t, e, ordersKey, "shipped", orderTemplateBody("Order {{order_id}} shipped"))
	putTemplate(t, e, ordersKey, "shipped", orderTemplateBody("Order {{order_id}} is on its way"))
	rec := e.do(t, "POST", "/v1/notifications", ordersKey, templateSend(map[string]any{
		"name": "shipped", "version": 1, "data": map[string]any{"order_id": 1001, "name": "Tom"}}))
	wantStatus(t, rec, http.StatusAccepted)
	msgs := e.receiveAll(t, notify.IngestQueue("orders"))
	if len(msgs) != 1 {
		t.Fatalf("%d messages queued", len(msgs))
	}
	m := msgs[0]
	if m.Attributes[notify.AttrTemplateName] != "shipped" || m.Attributes[notify.AttrTemplateVersion] != "1" {
		t.Fatalf("attributes %v", m.Attributes)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(m.Body, &raw); err != nil {
		t.Fatal(err)
	}
	if _, ok := raw["template"]; ok {
		t.Fatalf("the queued request still names the template: %s", m.Body)
	}
	var sent notify.SendRequest
	if err := json.Unmarshal(m.Body, &sent); err != nil {
		t.Fatal(err)
	}
	if sent.ChannelContent[notify.ChannelPush].Body != "Order 1001 shipped" || sent.Localized["ko"].Body != "Tom님, 주문 1001 발송" {
		t.Fatalf("queued content = %+v %+v", sent.ChannelContent, sent.Localized)
	}
	if err := sent.Validate(e.clock.Now()); err != nil {
		t.Fatalf("queued request does not validate: %v", err)
	}
}

func TestSendByTemplateErrors(t *testing.T) {
	t.Parallel()
	e := setup(t)
	putTemplate(t, e, ordersKey, "shipped", orderTemplateBody("Order {{order_id}} shipped"))
	koOnly := map[string]any{"locales": map[string]any{"ko": map[string]any{"title": "주문", "body": "주문 {{order_id}}"}},
		"variables": []map[string]any{{"name": "order_id"}}}
	putTemplate(t, e, ordersKey, "ko-only", koOnly)
	putTemplate(t, e, billingKey, "invoice", orderTemplateBody("Invoice {{order_id}}"))
	data := map[string]any{"order_id": "A1", "name": "Tom"}
	both := templateSend(map[string]any{"name": "shipped", "data": data})
	both["content"] = map[string]any{"body": "hi"}
	neither := templateSend(nil)
	delete(neither, "template")
	withLocale := templateSend(map[string]any{"name": "ko-only", "data": data})
	withLocale["locale"] = "ja"
	cases := []struct {
		name  string
		body  any
		field string
	}{
		{"missing variable", templateSend(map[string]any{"name": "shipped", "data": map[string]any{"name": "Tom"}}), "template.data.order_id"},
		{"unknown template", templateSend(map[string]any{"name": "nope", "data": data}), "template.name"},
		{"another service's template", templateSend(map[string]any{"name": "invoice", "data": data}), "template.name"},
		{"unknown version", templateSend(map[string]any{"name": "shipped", "version": 4, "data": data}), "template.version"},
		{"content and template", both, "template"},
		{"neither", neither, "content"},
		{"locale without content or default", withLocale, "locale"},
		{"unknown field in template", templateSend(map[string]any{"name": "shipped", "vars": data}), "template.vars"},
		{"version 0", templateSend(map[string]any{"name": "shipped", "version": 0, "data": data}), "template.version"},
		{"negative version", templateSend(map[string]any{"name": "shipped", "version": -2, "data": data}), "template.version"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := e.do(t, "POST", "/v1/notifications", ordersKey, c.body)
			wantError(t, rec, http.StatusBadRequest, notify.EINVALID, c.field)
		})
	}
	if msgs := e.receiveAll(t, notify.IngestQueue("orders")); len(msgs) != 0 {
		t.Fatalf("%d refused requests were queued", len(msgs))
	}
}

func TestCampaignByTemplate(t *testing.T) {
	t.Parallel()
	e := setup(t, withCampaigns())
	putTemplate(t, e, ordersKey, "sale", map[string]any{
		"channels":  map[string]any{"push": map[string]any{"title": "Sale", "body": "{{percent}}% off"}},
		"variables": []map[string]any{{"name": "percent"}}})
	body := campaignBody()
	delete(body, "content")
	body["template"] = map[string]any{"name": "sale", "data": map[string]any{"percent": 30}}
	rec := e.do(t, "POST", "/v1/campaigns", ordersKey, body)
	wantStatus(t, rec, http.StatusAccepted)
	acc := decodeBody[campaignState](t, rec)
	c, err := e.store.GetCampaign(context.Background(), acc.ID)
	if err != nil {
		t.Fatal(err)
	}
	n := c.Notification
	if n.TemplateName != "sale" || n.TemplateVersion != 1 || n.ContentFor(notify.ChannelPush, "").Body != "30% off" {
		t.Fatalf("campaign notification: template %q v%d, push %+v", n.TemplateName, n.TemplateVersion, n.ContentFor(notify.ChannelPush, ""))
	}
	body["template"] = map[string]any{"name": "sale", "data": map[string]any{}}
	wantError(t, e.do(t, "POST", "/v1/campaigns", ordersKey, body), http.StatusBadRequest, notify.EINVALID, "template.data.percent")
	body["content"] = map[string]any{"body": "x"}
	wantError(t, e.do(t, "POST", "/v1/campaigns", ordersKey, body), http.StatusBadRequest, notify.EINVALID, "template")
}

func TestNotificationShowsItsTemplate(t *testing.T) {
	t.Parallel()
	e := setup(t)
	sr := notify.SendRequest{Channels: []notify.Channel{notify.ChannelInbox}, Content: notify.Content{Body: "x"},
		Recipients: []notify.Recipient{{UserID: "u1"}}}
	n := sr.Notification("n_tpl", "orders", e.clock.Now())
	n.TemplateName, n.TemplateVersion = "shipped", 3
	if _, _, err := e.store.CreateNotification(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	rec := e.do(t, "GET", "/v1/notifications/n_tpl", ordersKey, nil)
	wantStatus(t, rec, http.StatusOK)
	wantDocumented(t, "GET", "/v1/notifications/{id}", rec)
	if got := decodeBody[notificationView](t, rec); got.TemplateName != "shipped" || got.TemplateVersion != 3 {
		t.Fatalf("view names template %q v%d", got.TemplateName, got.TemplateVersion)
	}
}
