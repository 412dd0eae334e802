package storetest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"herald/internal/notify"
)

var templateCases = []storeCase{
	{"TemplateVersionsAreImmutableAndNumbered", testTemplateVersions},
	{"TemplateConcurrentPutsGetDistinctVersions", testTemplateConcurrentPuts},
	{"TemplateBelongsToItsService", testTemplateServiceIsolation},
	{"TemplateListNewestFirstPaged", testTemplateList},
}

func sampleTemplate(service, name, body string, at time.Time) *notify.Template {
	return &notify.Template{Service: service, Name: name, CreatedAt: at, TemplateSpec: notify.TemplateSpec{
		Channels: map[notify.Channel]notify.Content{
			notify.ChannelPush:  {Title: "Order {{order_id}}", Body: body, Data: map[string]string{"order": "{{order_id}}"}},
			notify.ChannelEmail: {Title: "Order {{order_id}}", HTML: "<p>{{order_id}}</p>"},
		},
		Locales:       map[string]notify.Content{"ko": {Body: "주문 {{order_id}}"}},
		DefaultLocale: "ko",
		Variables:     []notify.TemplateVariable{{Name: "order_id"}, {Name: "coupon", Optional: true}},
	}}
}

func testTemplateVersions(t *testing.T, s notify.Store) {
	ctx := context.Background()
	first, err := s.PutTemplateVersion(ctx, sampleTemplate("svc", "order.shipped", "v1 {{order_id}}", t0))
	noErr(t, err)
	if first.Version != 1 {
		t.Fatalf("first put: version %d, want 1", first.Version)
	}
	in := sampleTemplate("svc", "order.shipped", "v2 {{order_id}}", t0.Add(time.Second))
	in.Version = 7 // ignored: the store assigns versions
	second, err := s.PutTemplateVersion(ctx, in)
	noErr(t, err)
	if second.Version != 2 {
		t.Fatalf("second put: version %d, want 2", second.Version)
	}
	latest, err := s.GetTemplate(ctx, "svc", "order.shipped", 0)
	noErr(t, err)
	if latest.Version != 2 || latest.Channels[notify.ChannelPush].Body != "v2 {{order_id}}" {
		t.Fatalf("latest = v%d %q, want v2", latest.Version, latest.Channels[notify.ChannelPush].Body)
	}
	got, err := s.GetTemplate(ctx, "svc", "order.shipped", 1)
	noErr(t, err)
	want := sampleTemplate("svc", "order.shipped", "v1 {{order_id}}", t0)
	if got.Version != 1 || got.Service != "svc" || got.Name != "order.shipped" || got.DefaultLocale != "ko" ||
		got.Channels[notify.ChannelPush].Body != "v1 {{order_id}}" || got.Channels[notify.ChannelPush].Data["order"] != "{{order_id}}" ||
		got.Channels[notify.ChannelEmail].HTML != want.Channels[notify.ChannelEmail].HTML ||
		got.Locales["ko"].Body != want.Locales["ko"].Body || !slices.Equal(got.Variables, want.Variables) {
		t.Fatalf("version 1 read back as %+v", got)
	}
	sameTime(t, "created_at", got.CreatedAt, t0)
	_, err = s.GetTemplate(ctx, "svc", "order.shipped", 3)
	wantCode(t, err, notify.ENOTFOUND)
	_, err = s.GetTemplate(ctx, "svc", "nope", 0)
	wantCode(t, err, notify.ENOTFOUND)
}

func testTemplateConcurrentPuts(t *testing.T, s notify.Store) {
	ctx := context.Background()
	const n = 6
	versions := make([]int, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			got, err := s.PutTemplateVersion(ctx, sampleTemplate("svc", "race", fmt.Sprintf("put %d", i), t0))
			errs[i] = err
			if err == nil {
				versions[i] = got.Version
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		noErr(t, err)
	}
	slices.Sort(versions)
	if !slices.Equal(versions, []int{1, 2, 3, 4, 5, 6}) {
		t.Fatalf("concurrent puts got versions %v, want 1..6 each once", versions)
	}
	for v := 1; v <= n; v++ {
		if _, err := s.GetTemplate(ctx, "svc", "race", v); err != nil {
			t.Fatalf("version %d: %v", v, err)
		}
	}
	ts, _, err := s.ListTemplates(ctx, "svc", "", 10)
	noErr(t, err)
	if len(ts) != 1 || ts[0].Version != n {
		t.Fatalf("listing after concurrent puts = %d entries (first v%d), want 1 entry at v%d", len(ts), versionOf(ts), n)
	}
}

func versionOf(ts []notify.Template) int {
	if len(ts) == 0 {
		return 0
	}
	return ts[0].Version
}

func testTemplateServiceIsolation(t *testing.T, s notify.Store) {
	ctx := context.Background()
	_, err := s.PutTemplateVersion(ctx, sampleTemplate("shop", "welcome", "hi", t0))
	noErr(t, err)
	_, err = s.PutTemplateVersion(ctx, sampleTemplate("shop", "welcome", "hi again", t0))
	noErr(t, err)
	_, err = s.GetTemplate(ctx, "bank", "welcome", 0)
	wantCode(t, err, notify.ENOTFOUND)
	_, err = s.GetTemplate(ctx, "bank", "welcome", 1)
	wantCode(t, err, notify.ENOTFOUND)
	ts, next, err := s.ListTemplates(ctx, "bank", "", 10)
	noErr(t, err)
	if len(ts) != 0 || next != "" {
		t.Fatalf("another service lists %d templates", len(ts))
	}
	own, err := s.PutTemplateVersion(ctx, sampleTemplate("bank", "welcome", "hello", t0))
	noErr(t, err)
	if own.Version != 1 {
		t.Fatalf("another service's first put of the same name: version %d, want 1", own.Version)
	}
	got, err := s.GetTemplate(ctx, "shop", "welcome", 0)
	noErr(t, err)
	if got.Version != 2 || got.Service != "shop" {
		t.Fatalf("shop's template = %s v%d, want shop v2", got.Service, got.Version)
	}
}

func testTemplateList(t *testing.T, s notify.Store) {
	ctx := context.Background()
	for i, name := range []string{"a", "b", "c", "d"} {
		_, err := s.PutTemplateVersion(ctx, sampleTemplate("svc", name, "x", t0.Add(time.Duration(i)*time.Second)))
		noErr(t, err)
	}
	// b again: its second version is now the newest.
	_, err := s.PutTemplateVersion(ctx, sampleTemplate("svc", "b", "y", t0.Add(time.Minute)))
	noErr(t, err)
	var names []string
	var versions []int
	cursor := ""
	for page := 0; ; page++ {
		if page > 5 {
			t.Fatal("listing does not end")
		}
		ts, next, err := s.ListTemplates(ctx, "svc", cursor, 2)
		noErr(t, err)
		if len(ts) > 2 {
			t.Fatalf("page of %d, limit 2", len(ts))
		}
		for _, tp := range ts {
			names = append(names, tp.Name)
			versions = append(versions, tp.Version)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if !slices.Equal(names, []string{"b", "d", "c", "a"}) || !slices.Equal(versions, []int{2, 1, 1, 1}) {
		t.Fatalf("listing = %v %v, want [b d c a] [2 1 1 1]", names, versions)
	}
}
