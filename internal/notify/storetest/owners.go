package storetest

import (
	"testing"

	"herald/internal/notify"
)

// ownerCases cover notify.AddressFinder: the recipient view's search by address.
var ownerCases = []storeCase{
	{"UserByAddress/TokensAndContacts", testUserByAddress},
}

func finder(t *testing.T, s notify.Store) notify.AddressFinder {
	t.Helper()
	f, ok := s.(notify.AddressFinder)
	if !ok {
		t.Fatalf("%T does not implement notify.AddressFinder", s)
	}
	return f
}

func testUserByAddress(t *testing.T, s notify.Store) {
	f := finder(t, s)
	find := func(c notify.Channel, address string) (string, error) {
		t.Helper()
		return f.UserByAddress(t.Context(), c, address)
	}
	want := func(c notify.Channel, address, user string) {
		t.Helper()
		got, err := find(c, address)
		noErr(t, err)
		if got != user {
			t.Fatalf("%s %q belongs to %q, want %q", c, address, got, user)
		}
	}
	gone := func(c notify.Channel, address string) {
		t.Helper()
		_, err := find(c, address)
		wantCode(t, err, notify.ENOTFOUND)
	}
	put := func(user, email, phone string) {
		t.Helper()
		noErr(t, s.PutContact(t.Context(), notify.Contact{UserID: user, Email: email, Phone: phone, UpdatedAt: t0}))
	}

	noErr(t, s.PutDevice(t.Context(), device("finder-1", "tok-finder-1")))
	want(notify.ChannelPush, "tok-finder-1", "finder-1")
	noErr(t, s.PutDevice(t.Context(), device("finder-2", "tok-finder-1"))) // the token moves
	want(notify.ChannelPush, "tok-finder-1", "finder-2")
	gone(notify.ChannelPush, "tok-nobody")

	put("finder-2", "Find.Me@Example.com", "+821055550000")
	want(notify.ChannelEmail, "find.me@example.com", "finder-2") // emails match whatever their case
	want(notify.ChannelSMS, "+821055550000", "finder-2")
	// A new email and no phone: the old ones are no longer the user's.
	put("finder-2", "new@example.com", "")
	gone(notify.ChannelEmail, "find.me@example.com")
	gone(notify.ChannelSMS, "+821055550000")
	want(notify.ChannelEmail, "new@example.com", "finder-2")
	// Another user takes the address; the first one's next change leaves it with them.
	put("finder-3", "new@example.com", "+821055550001")
	want(notify.ChannelEmail, "new@example.com", "finder-3")
	put("finder-2", "again@example.com", "")
	want(notify.ChannelEmail, "new@example.com", "finder-3")
	want(notify.ChannelEmail, "again@example.com", "finder-2")
	want(notify.ChannelSMS, "+821055550001", "finder-3")

	_, err := find(notify.ChannelInbox, "anything")
	wantCode(t, err, notify.EINVALID)
}
