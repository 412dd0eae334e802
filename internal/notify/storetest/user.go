package storetest

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"herald/internal/notify"
)

var userCases = []storeCase{
	{"PutDevice/Replace", testPutDeviceReplace},
	{"PutDevice/TokenMovesToAnotherUser", testPutDeviceMoves},
	{"DeleteDevice/NotFound", testDeleteDevice},
	{"RemoveDeadDevice/SeenBefore", testRemoveDeadDevice},
	{"ListDevices/ManyUsers", testListDevicesMany},
	{"PutDevice/WebPushSubscription", testWebPushDevice},
	{"Contacts/RoundTrip", testContacts},
	{"Preferences/RoundTrip", testPreferences},
	{"Suppressions/IdempotentLookup", testSuppressions},
}

func device(user, token string) notify.Device {
	return notify.Device{UserID: user, Platform: notify.PlatformFCM, App: "default", Token: token,
		Environment: "production", Locale: "ko-KR", TimeZone: "Asia/Seoul", UpdatedAt: t0}
}

func sameDevice(t *testing.T, got, want notify.Device) {
	t.Helper()
	if got.UserID != want.UserID || got.Platform != want.Platform || got.App != want.App || got.Token != want.Token ||
		got.Environment != want.Environment || got.Locale != want.Locale || got.TimeZone != want.TimeZone ||
		!got.UpdatedAt.Equal(want.UpdatedAt) {
		t.Fatalf("device = %+v, want %+v", got, want)
	}
}

func listDevices(t *testing.T, s notify.Store, users ...string) map[string][]notify.Device {
	t.Helper()
	m, err := s.ListDevices(t.Context(), users)
	noErr(t, err)
	return m
}

func testPutDeviceReplace(t *testing.T, s notify.Store) {
	noErr(t, s.PutDevice(t.Context(), device("u1", "tok-1")))
	d := device("u1", "tok-1")
	d.Platform, d.App, d.Environment, d.Locale, d.TimeZone = notify.PlatformAPNs, "com.example.app", "sandbox", "en-US", "UTC"
	d.UpdatedAt = t0.Add(time.Hour)
	noErr(t, s.PutDevice(t.Context(), d))
	noErr(t, s.PutDevice(t.Context(), device("u1", "tok-2")))

	got := listDevices(t, s, "u1")["u1"]
	if len(got) != 2 {
		t.Fatalf("u1 has %d devices, want 2: %+v", len(got), got)
	}
	for _, g := range got {
		if g.Token == "tok-1" {
			sameDevice(t, g, d)
		} else {
			sameDevice(t, g, device("u1", "tok-2"))
		}
	}
}

func testPutDeviceMoves(t *testing.T, s notify.Store) {
	noErr(t, s.PutDevice(t.Context(), device("u1", "shared-token")))
	noErr(t, s.PutDevice(t.Context(), device("u2", "shared-token")))
	m := listDevices(t, s, "u1", "u2")
	if _, ok := m["u1"]; ok {
		t.Fatalf("u1 still has %+v after its token moved", m["u1"])
	}
	if len(m["u2"]) != 1 {
		t.Fatalf("u2 has %d devices, want 1", len(m["u2"]))
	}
	sameDevice(t, m["u2"][0], device("u2", "shared-token"))
	wantCode(t, s.DeleteDevice(t.Context(), "u1", "shared-token"), notify.ENOTFOUND)
}

func testDeleteDevice(t *testing.T, s notify.Store) {
	noErr(t, s.PutDevice(t.Context(), device("u1", "tok-1")))
	wantCode(t, s.DeleteDevice(t.Context(), "u2", "tok-1"), notify.ENOTFOUND)
	if len(listDevices(t, s, "u1")["u1"]) != 1 {
		t.Fatal("another user's DeleteDevice removed the device")
	}
	noErr(t, s.DeleteDevice(t.Context(), "u1", "tok-1"))
	if m := listDevices(t, s, "u1"); len(m) != 0 {
		t.Fatalf("devices after delete = %+v", m)
	}
	wantCode(t, s.DeleteDevice(t.Context(), "u1", "tok-1"), notify.ENOTFOUND)
	wantCode(t, s.DeleteDevice(t.Context(), "u1", "never-registered"), notify.ENOTFOUND)
}

func testRemoveDeadDevice(t *testing.T, s notify.Store) {
	ctx := t.Context()
	// Registered again (at t0) after the failed send was seen (t0-1m): the fresh registration wins.
	noErr(t, s.PutDevice(ctx, device("u1", "tok-1")))
	removed, err := s.RemoveDeadDevice(ctx, "tok-1", t0.Add(-time.Minute))
	noErr(t, err)
	if removed || len(listDevices(t, s, "u1")["u1"]) != 1 {
		t.Fatalf("removed = %v; a device registered after seenBefore must survive", removed)
	}

	removed, err = s.RemoveDeadDevice(ctx, "tok-1", t0.Add(time.Minute))
	noErr(t, err)
	if !removed || len(listDevices(t, s, "u1")) != 0 {
		t.Fatalf("removed = %v; a device last registered before seenBefore must go", removed)
	}

	removed, err = s.RemoveDeadDevice(ctx, "tok-1", t0.Add(time.Minute))
	noErr(t, err)
	if removed {
		t.Fatal("removed = true for a token already gone")
	}
}

func testListDevicesMany(t *testing.T, s notify.Store) {
	users := make([]string, manyUsers)
	want := map[string]int{}
	for i := range users {
		users[i] = fmt.Sprintf("user-%04d", i)
		if i%4 == 3 {
			continue // no devices
		}
		k := 1 + i%3
		for j := range k {
			noErr(t, s.PutDevice(t.Context(), device(users[i], fmt.Sprintf("tok-%04d-%d", i, j))))
		}
		want[users[i]] = k
	}
	got := listDevices(t, s, append(users, "nobody")...)
	if len(got) != len(want) {
		t.Fatalf("ListDevices returned %d users, want %d (only users with devices)", len(got), len(want))
	}
	for u, k := range want {
		if len(got[u]) != k {
			t.Fatalf("%s has %d devices, want %d", u, len(got[u]), k)
		}
		for _, d := range got[u] {
			if d.UserID != u {
				t.Fatalf("device %s listed under %s belongs to %s", d.Token, u, d.UserID)
			}
		}
	}
}

func contact(i int) notify.Contact {
	return notify.Contact{
		UserID:    fmt.Sprintf("user-%04d", i),
		Email:     fmt.Sprintf("person%04d@example.com", i),
		Phone:     fmt.Sprintf("+8210%08d", i),
		Locale:    "ko",
		TimeZone:  "Asia/Seoul",
		UpdatedAt: t0.Add(time.Duration(i) * time.Second),
	}
}

func sameContact(t *testing.T, got, want notify.Contact) {
	t.Helper()
	if got.UserID != want.UserID || got.Email != want.Email || got.Phone != want.Phone || got.Locale != want.Locale ||
		got.TimeZone != want.TimeZone || !got.UpdatedAt.Equal(want.UpdatedAt) {
		t.Fatalf("contact = %+v, want %+v", got, want)
	}
}

func testContacts(t *testing.T, s notify.Store) {
	users := make([]string, manyUsers)
	for i := range users {
		users[i] = contact(i).UserID
		if i%5 == 4 {
			continue // no contact
		}
		c := contact(i)
		if i%7 == 0 {
			c.Phone = "" // email only
		}
		noErr(t, s.PutContact(t.Context(), c))
	}
	replaced := contact(0)
	replaced.Email, replaced.Phone = "new-address@example.org", "+14155550100"
	noErr(t, s.PutContact(t.Context(), replaced))

	got, err := s.GetContacts(t.Context(), append(users, "nobody"))
	noErr(t, err)
	for i, u := range users {
		c, ok := got[u]
		switch {
		case i%5 == 4:
			if ok {
				t.Fatalf("%s has contact %+v, want none", u, c)
			}
		case i == 0:
			sameContact(t, c, replaced)
		default:
			want := contact(i)
			if i%7 == 0 {
				want.Phone = ""
			}
			sameContact(t, c, want)
		}
	}
	if len(got) != manyUsers-manyUsers/5 {
		t.Fatalf("GetContacts returned %d contacts, want %d", len(got), manyUsers-manyUsers/5)
	}
}

func samePreferences(t *testing.T, got, want notify.Preferences) {
	t.Helper()
	if got.UserID != want.UserID || !got.UpdatedAt.Equal(want.UpdatedAt) {
		t.Fatalf("preferences = %+v, want %+v", got, want)
	}
	sameTimePtr(t, want.UserID+" MarketingConsent", got.MarketingConsent, want.MarketingConsent)
	sameTimePtr(t, want.UserID+" NightConsent", got.NightConsent, want.NightConsent)
	if len(got.OptOut) != len(want.OptOut) || (len(want.OptOut) > 0 && !reflect.DeepEqual(got.OptOut, want.OptOut)) {
		t.Fatalf("%s OptOut = %v, want %v", want.UserID, got.OptOut, want.OptOut)
	}
}

func preferences(i int) notify.Preferences {
	p := notify.Preferences{UserID: fmt.Sprintf("user-%04d", i), UpdatedAt: t0}
	switch i % 4 {
	case 0: // the zero value: no opt-outs, no consent
	case 1:
		p.MarketingConsent = ptr(t0.Add(-24 * time.Hour))
	case 2:
		p.MarketingConsent = ptr(t0.Add(-48 * time.Hour))
		p.NightConsent = ptr(t0.Add(-47 * time.Hour))
		p.OptOut = map[notify.Channel][]notify.Category{notify.ChannelSMS: {notify.CategoryMarketing}}
	case 3:
		p.OptOut = map[notify.Channel][]notify.Category{
			notify.ChannelEmail: {notify.CategoryMarketing, notify.CategoryTransactional},
			"*":                 {"*"},
		}
	}
	return p
}

func testPreferences(t *testing.T, s notify.Store) {
	users := make([]string, manyUsers)
	for i := range users {
		users[i] = preferences(i).UserID
		if i%10 == 9 {
			continue // never stored
		}
		noErr(t, s.PutPreferences(t.Context(), preferences(i)))
	}
	// Replacing drops what the new value leaves out: consent withdrawn, opt-outs cleared.
	replaced := preferences(2)
	replaced.MarketingConsent, replaced.NightConsent, replaced.OptOut = nil, nil, nil
	replaced.UpdatedAt = t0.Add(time.Hour)
	noErr(t, s.PutPreferences(t.Context(), replaced))

	got, err := s.GetPreferences(t.Context(), users)
	noErr(t, err)
	if len(got) != manyUsers-manyUsers/10 {
		t.Fatalf("GetPreferences returned %d users, want %d", len(got), manyUsers-manyUsers/10)
	}
	for i, u := range users {
		p, ok := got[u]
		switch {
		case i%10 == 9:
			if ok {
				t.Fatalf("%s has preferences %+v, want none", u, p)
			}
		case i == 2:
			samePreferences(t, p, replaced)
		default:
			samePreferences(t, p, preferences(i))
		}
	}
}

func suppression(i int) notify.Suppression {
	addr := fmt.Sprintf("bounced%04d@example.com", i)
	return notify.Suppression{
		AddressKey: notify.AddressKey(notify.ChannelEmail, addr),
		Masked:     notify.MaskEmail(addr),
		Channel:    notify.ChannelEmail,
		Reason:     "bounce",
		CreatedAt:  t0,
	}
}

func testSuppressions(t *testing.T, s notify.Store) {
	keys := make([]string, manyUsers)
	for i := range keys {
		keys[i] = suppression(i).AddressKey
		if i%3 == 0 {
			noErr(t, s.Suppress(t.Context(), suppression(i)))
		}
	}
	// Suppressing again is not an error and refreshes the entry.
	again := suppression(3)
	again.Reason, again.CreatedAt = "complaint", t0.Add(time.Hour)
	noErr(t, s.Suppress(t.Context(), again))
	noErr(t, s.Suppress(t.Context(), again))

	got, err := s.Suppressed(t.Context(), append(keys, notify.AddressKey(notify.ChannelSMS, "+821000000000")))
	noErr(t, err)
	if len(got) != manyUsers/3 {
		t.Fatalf("Suppressed returned %d, want %d", len(got), manyUsers/3)
	}
	for i, k := range keys {
		sp, ok := got[k]
		if ok != (i%3 == 0) {
			t.Fatalf("key %d suppressed = %v, want %v", i, ok, i%3 == 0)
		}
		if !ok {
			continue
		}
		want := suppression(i)
		if i == 3 {
			want = again
		}
		if sp.AddressKey != want.AddressKey || sp.Masked != want.Masked || sp.Channel != want.Channel ||
			sp.Reason != want.Reason || !sp.CreatedAt.Equal(want.CreatedAt) {
			t.Fatalf("suppression = %+v, want %+v", sp, want)
		}
	}

	// Lookup by one key among many.
	one, err := s.Suppressed(t.Context(), []string{keys[600]})
	noErr(t, err)
	if len(one) != 1 || one[keys[600]].Masked != suppression(600).Masked {
		t.Fatalf("Suppressed([one key]) = %+v", one)
	}
}

// testWebPushDevice stores a browser's subscription as a device: its token is the canonical
// JSON of the longest endpoint the API accepts and both keys, which must fit every store's keys
// and come back byte for byte, and dead-token cleanup removes it like any other.
func testWebPushDevice(t *testing.T, s notify.Store) {
	sub := notify.WebPushSubscription{
		Endpoint: "https://push.example.net/wpush/v2/" + strings.Repeat("gAAAAABk-x_Q", 64),
		Keys: notify.WebPushKeys{
			P256dh: "BPHndDgeUWreF-Mqpx26CbsZkBRTXA6oNuRGEru4ziQWeowoviMTrlnWNYvR-GwkWvW0WTKm9AWnlsD4sA38AEQ",
			Auth:   "AAECAwQFBgcICQoLDA0ODw",
		},
	}
	sub.Endpoint = sub.Endpoint[:notify.MaxWebPushEndpoint]
	if err := sub.Validate(false); err != nil {
		t.Fatal(err)
	}
	d := device("u1", sub.Token())
	d.Platform = notify.PlatformWebPush
	noErr(t, s.PutDevice(t.Context(), d))
	noErr(t, s.PutDevice(t.Context(), device("u1", "tok-fcm")))
	got := listDevices(t, s, "u1")["u1"]
	if len(got) != 2 {
		t.Fatalf("u1 has %d devices, want 2", len(got))
	}
	for _, g := range got {
		if g.Platform == notify.PlatformWebPush {
			sameDevice(t, g, d)
			if back, ok := notify.ParseWebPushToken(g.Token); !ok || back != sub {
				t.Fatalf("token does not parse back to the subscription: %q", g.Token)
			}
		}
	}
	removed, err := s.RemoveDeadDevice(t.Context(), d.Token, t0.Add(time.Minute))
	noErr(t, err)
	if !removed {
		t.Fatal("the dead subscription was not removed")
	}
	if got := listDevices(t, s, "u1")["u1"]; len(got) != 1 || got[0].Token != "tok-fcm" {
		t.Fatalf("after cleanup u1 has %+v", got)
	}
}
