package notify_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"herald/internal/notify"
)

func orderTemplate() notify.TemplateSpec {
	return notify.TemplateSpec{
		Channels: map[notify.Channel]notify.Content{
			notify.ChannelPush:  {Title: "Order {{order_id}}", Body: "Hi {{name}}, order {{order_id}} shipped{{#coupon}} ({{coupon}}){{/coupon}}", Data: map[string]string{"order": "{{order_id}}"}},
			notify.ChannelEmail: {Title: "Order {{order_id}} for {{name}}", Body: "Hi {{name}}", HTML: "<p>Hi {{name}}</p><p>{{{signature}}}</p>"},
		},
		Locales:   map[string]notify.Content{"ko": {Body: "{{name}}님, 주문 {{order_id}} 발송"}},
		Variables: []notify.TemplateVariable{{Name: "order_id"}, {Name: "name"}, {Name: "coupon", Optional: true}, {Name: "signature", Optional: true}},
	}
}

func wantField(t *testing.T, err error, field string) {
	t.Helper()
	if got := fieldOf(err); got != field {
		t.Fatalf("err = %v (field %q), want an error naming %s", err, got, field)
	}
}

func TestTemplateValidateNamesFields(t *testing.T) {
	cases := []struct {
		name, field, msg string
		edit             func(s *notify.TemplateSpec)
	}{
		{"syntax error with its line", "channels.email.html", "line 2", func(s *notify.TemplateSpec) {
			c := s.Channels[notify.ChannelEmail]
			c.HTML = "<p>\n{{#name}}unclosed</p>"
			s.Channels[notify.ChannelEmail] = c
		}},
		{"undeclared variable", "locales.ko.body", "not declared", func(s *notify.TemplateSpec) {
			s.Locales["ko"] = notify.Content{Body: "{{nickname}}"}
		}},
		{"duplicate variable", "variables[2]", "twice", func(s *notify.TemplateSpec) {
			s.Variables[2].Name = "order_id"
		}},
		{"bad variable name", "variables[1].name", "", func(s *notify.TemplateSpec) {
			s.Variables[1].Name = "1st"
		}},
		{"partial", "channels.push.body", "partials", func(s *notify.TemplateSpec) {
			c := s.Channels[notify.ChannelPush]
			c.Body = "{{> /etc/passwd}}"
			s.Channels[notify.ChannelPush] = c
		}},
		{"unknown channel", "channels.fax", "", func(s *notify.TemplateSpec) {
			s.Channels["fax"] = notify.Content{Body: "x"}
		}},
		{"bad locale", "locales.Korean", "", func(s *notify.TemplateSpec) {
			s.Locales["Korean"] = notify.Content{Body: "x"}
		}},
		{"default locale not a variant", "default_locale", "", func(s *notify.TemplateSpec) {
			s.DefaultLocale = "en"
		}},
		{"control character in a title", "channels.push.title", "control", func(s *notify.TemplateSpec) {
			s.Channels[notify.ChannelPush] = notify.Content{Title: "a\nb", Body: "x"}
		}},
		{"no content", "channels", "", func(s *notify.TemplateSpec) {
			s.Channels, s.Locales = nil, nil
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := orderTemplate()
			if err := s.Validate(); err != nil {
				t.Fatalf("the sample template is refused: %v", err)
			}
			c.edit(&s)
			err := s.Validate()
			wantField(t, err, c.field)
			if !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("err = %v, want it to say %q", err, c.msg)
			}
		})
	}
}

func TestTemplateRenderEscapesHTMLOnly(t *testing.T) {
	s := orderTemplate()
	out, err := s.Render(map[string]any{"order_id": 12345678901, "name": `<b>Tom & "Jerry"</b>`, "signature": "<i>Shop</i>"})
	if err != nil {
		t.Fatal(err)
	}
	push, email := out.ChannelContent[notify.ChannelPush], out.ChannelContent[notify.ChannelEmail]
	if want := `Hi <b>Tom & "Jerry"</b>, order 12345678901 shipped`; push.Body != want {
		t.Errorf("push body = %q, want %q (text is not escaped; numbers as sent)", push.Body, want)
	}
	if push.Data["order"] != "12345678901" || push.Title != "Order 12345678901" {
		t.Errorf("push title %q data %v", push.Title, push.Data)
	}
	if want := `Order 12345678901 for <b>Tom & "Jerry"</b>`; email.Title != want {
		t.Errorf("email title = %q, want %q", email.Title, want)
	}
	if want := `<p>Hi &lt;b&gt;Tom &amp; &#34;Jerry&#34;&lt;/b&gt;</p><p><i>Shop</i></p>`; email.HTML != want {
		t.Errorf("email html = %q, want %q (escaped, {{{…}}} raw)", email.HTML, want)
	}
	if out.Localized["ko"].Body != `<b>Tom & "Jerry"</b>님, 주문 12345678901 발송` {
		t.Errorf("ko body = %q", out.Localized["ko"].Body)
	}
}

func TestTemplateRenderMissingVariables(t *testing.T) {
	s := orderTemplate()
	_, err := s.Render(map[string]any{"name": "Tom"})
	wantField(t, err, "template.data.order_id")

	// An optional variable renders empty.
	out, err := s.Render(map[string]any{"name": "Tom", "order_id": "A1"})
	if err != nil {
		t.Fatal(err)
	}
	if got := out.ChannelContent[notify.ChannelPush].Body; got != "Hi Tom, order A1 shipped" {
		t.Fatalf("push body = %q", got)
	}

	// A name looked up inside a section is an error too, not an empty string.
	s.Channels[notify.ChannelSMS] = notify.Content{Body: "{{#discount}}{{code}} off{{/discount}}"}
	_, err = s.Render(map[string]any{"name": "Tom", "order_id": "A1", "discount": map[string]any{"value": 10}})
	wantField(t, err, "template.data.code")

	// Rendered text is checked like sent text: a line break does not belong in a title.
	_, err = s.Render(map[string]any{"name": "Tom", "order_id": "A1\nB"})
	wantField(t, err, "template.data")
}

// A template's image URL may hold placeholders; the rendered one must be an absolute http(s) URL.
func TestTemplateImageURLCheckedOnceRendered(t *testing.T) {
	s := orderTemplate()
	push := s.Channels[notify.ChannelPush]
	push.ImageURL = "{{image}}"
	s.Channels[notify.ChannelPush] = push
	s.Variables = append(s.Variables, notify.TemplateVariable{Name: "image"})
	if err := s.Validate(); err != nil {
		t.Fatalf("a template with a placeholder image URL refused: %v", err)
	}
	if _, err := s.Render(map[string]any{"name": "Tom", "order_id": "A1", "image": "https://cdn.example.com/a1.png"}); err != nil {
		t.Fatal(err)
	}
	_, err := s.Render(map[string]any{"name": "Tom", "order_id": "A1", "image": "a1.png"})
	wantField(t, err, "template.data")
	push.ImageURL = "a1.png"
	s.Channels[notify.ChannelPush] = push
	wantField(t, s.Validate(), "channels.push.image_url")
}

func TestTemplatePreviewReportsMissingByField(t *testing.T) {
	s := orderTemplate()
	p := s.Preview(map[string]any{"name": "Tom"})
	if got := p.Missing["channels.push.body"]; len(got) != 1 || got[0] != "order_id" {
		t.Fatalf("missing of channels.push.body = %v, want [order_id]; all: %v", got, p.Missing)
	}
	if _, ok := p.Missing["channels.email.html"]; ok {
		t.Fatalf("channels.email.html reported missing: %v", p.Missing)
	}
	if got := p.Channels[notify.ChannelPush].Body; got != "Hi Tom, order  shipped" {
		t.Fatalf("preview push body = %q", got)
	}
	if got := p.Locales["ko"].Body; got != "Tom님, 주문  발송" {
		t.Fatalf("preview ko body = %q", got)
	}
}

// memTemplates is a TemplateStore over a map, for ApplyTemplate.
type memTemplates map[string][]notify.Template

func (m memTemplates) PutTemplateVersion(_ context.Context, t *notify.Template) (*notify.Template, error) {
	c := *t
	c.Version = len(m[t.Service+"/"+t.Name]) + 1
	m[t.Service+"/"+t.Name] = append(m[t.Service+"/"+t.Name], c)
	return &c, nil
}

func (m memTemplates) GetTemplate(_ context.Context, service, name string, version int) (*notify.Template, error) {
	vs := m[service+"/"+name]
	if version == 0 {
		version = len(vs)
	}
	if version < 1 || version > len(vs) {
		return nil, notify.Errorf(notify.ENOTFOUND, "template not found")
	}
	return &vs[version-1], nil
}

func (m memTemplates) ListTemplates(context.Context, string, string, int) ([]notify.Template, string, error) {
	return nil, "", nil
}

func TestApplyTemplate(t *testing.T) {
	ctx := context.Background()
	store := memTemplates{}
	spec := orderTemplate()
	store.PutTemplateVersion(ctx, &notify.Template{Service: "shop", Name: "shipped", TemplateSpec: spec})
	koOnly := notify.TemplateSpec{Locales: map[string]notify.Content{"ko": {Body: "안녕 {{name}}"}}, Variables: []notify.TemplateVariable{{Name: "name"}}}
	store.PutTemplateVersion(ctx, &notify.Template{Service: "shop", Name: "ko-only", TemplateSpec: koOnly})

	req := func(ref notify.TemplateRef) *notify.SendRequest {
		return &notify.SendRequest{Channels: []notify.Channel{notify.ChannelPush, notify.ChannelEmail},
			Recipients: []notify.Recipient{{UserID: "u1"}}, Template: &ref}
	}
	data := map[string]any{"order_id": "A1", "name": "Tom"}

	r := req(notify.TemplateRef{Name: "shipped", Data: data})
	name, version, err := r.ApplyTemplate(ctx, store, "shop")
	if err != nil || name != "shipped" || version != 1 {
		t.Fatalf("ApplyTemplate = %q %d %v", name, version, err)
	}
	if r.Template != nil || r.ChannelContent[notify.ChannelPush].Body != "Hi Tom, order A1 shipped" || r.Localized["ko"].Body == "" {
		t.Fatalf("rendered request = %+v", r)
	}
	if err := r.Validate(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)); err != nil {
		t.Fatalf("a rendered request does not validate: %v", err)
	}

	for _, c := range []struct {
		name  string
		req   *notify.SendRequest
		field string
	}{
		{"content and template", func() *notify.SendRequest {
			r := req(notify.TemplateRef{Name: "shipped", Data: data})
			r.Content.Body = "x"
			return r
		}(), "template"},
		{"no name", req(notify.TemplateRef{Data: data}), "template.name"},
		{"unknown name", req(notify.TemplateRef{Name: "nope", Data: data}), "template.name"},
		{"unknown version", req(notify.TemplateRef{Name: "shipped", Version: 9, Data: data}), "template.version"},
		{"another service's", req(notify.TemplateRef{Name: "shipped", Data: data}), "template.name"},
		{"missing variable", req(notify.TemplateRef{Name: "shipped", Data: map[string]any{"name": "Tom"}}), "template.data.order_id"},
		{"locale without content or default", func() *notify.SendRequest {
			r := req(notify.TemplateRef{Name: "ko-only", Data: data})
			r.Locale = "ja"
			return r
		}(), "locale"},
		{"channel without content", func() *notify.SendRequest {
			r := req(notify.TemplateRef{Name: "ko-only", Data: data})
			r.Locale = "ko"
			r.Channels = []notify.Channel{notify.ChannelEmail} // no title
			return r
		}(), "channels[0]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			service := "shop"
			if c.name == "another service's" {
				service = "bank"
			}
			_, _, err := c.req.ApplyTemplate(ctx, store, service)
			wantField(t, err, c.field)
		})
	}

	// A template of locales alone takes the send's locale as its base content.
	r = req(notify.TemplateRef{Name: "ko-only", Data: data})
	r.Channels, r.Locale = []notify.Channel{notify.ChannelPush}, "ko-KR"
	if _, _, err := r.ApplyTemplate(ctx, store, "shop"); err != nil {
		t.Fatal(err)
	}
	if r.Content.Body != "안녕 Tom" {
		t.Fatalf("base content = %+v", r.Content)
	}
}

// A section over a long list can't grow the output past the limit: it is refused naming the data.
func TestTemplateRenderOutputIsCapped(t *testing.T) {
	for _, body := range []string{"{{#items}}{{.}}{{/items}}", "{{#items}}- {{.}}\n{{/items}}"} {
		s := notify.TemplateSpec{Channels: map[notify.Channel]notify.Content{notify.ChannelPush: {Body: body}},
			Variables: []notify.TemplateVariable{{Name: "items"}}}
		items := make([]any, 20000)
		for i := range items {
			items[i] = strings.Repeat("x", 20)
		}
		_, err := s.Render(map[string]any{"items": items})
		wantField(t, err, "template.data")
		if !strings.Contains(err.Error(), "renders to more than") {
			t.Fatalf("%q: err = %v", body, err)
		}
	}
}

// TestTemplateDataObjectsOnlyInSections: an object or a list written as text ({{coupon}}) is a
// 400 naming it, never Go's writing of it ("map[value:10]"); in a section, objects and lists
// of objects render their fields.
func TestTemplateDataObjectsOnlyInSections(t *testing.T) {
	s := orderTemplate()
	for _, v := range []any{map[string]any{"value": 10}, []any{"a", "b"}} {
		_, err := s.Render(map[string]any{"name": "Tom", "order_id": "A1", "coupon": v})
		wantField(t, err, "template.data.coupon")
	}
	_, err := s.Render(map[string]any{"name": map[string]any{"first": "Tom"}, "order_id": "A1"})
	wantField(t, err, "template.data.name")

	s.Channels[notify.ChannelSMS] = notify.Content{Body: "{{#items}}{{name}} x{{qty}}, {{/items}}{{#shop}}{{shop.name}}{{/shop}}"}
	out, err := s.Render(map[string]any{"name": "Tom", "order_id": "A1",
		"items": []any{map[string]any{"name": "Tea", "qty": 2.0}, map[string]any{"name": "Cup", "qty": 1.0}},
		"shop":  map[string]any{"name": "Herald Store"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := out.ChannelContent[notify.ChannelSMS].Body; got != "Tea x2, Cup x1, Herald Store" {
		t.Fatalf("sms body = %q", got)
	}
	s.Channels[notify.ChannelSMS] = notify.Content{Body: "{{#items}}{{.}}{{/items}}"}
	_, err = s.Render(map[string]any{"name": "Tom", "order_id": "A1", "items": []any{map[string]any{"name": "Tea"}}})
	wantField(t, err, "template.data.items")
}
