package notify

import "testing"

// A token names its user, channel and category; any change to it, or another deployment's key,
// makes it a token nobody signed.
func TestUnsubscribeToken(t *testing.T) {
	key, other := UnsubscribeKeyFrom("secret one"), UnsubscribeKeyFrom("secret two")
	u := Unsubscribe{UserID: "user.with-odd/chars?1", Channel: ChannelEmail, Category: CategoryMarketing}
	tok := UnsubscribeToken(key, u)
	if got, ok := ParseUnsubscribeToken(key, tok); !ok || got != u {
		t.Fatalf("ParseUnsubscribeToken(%q) = %+v %v, want %+v", tok, got, ok, u)
	}
	if _, ok := ParseUnsubscribeToken(other, tok); ok {
		t.Fatal("another deployment's key accepted the token")
	}
	for i := range tok {
		for _, c := range []byte{'A', '0', '.', '_'} {
			if tok[i] == c {
				continue
			}
			bad := tok[:i] + string(c) + tok[i+1:]
			if _, ok := ParseUnsubscribeToken(key, bad); ok {
				t.Fatalf("the token altered at %d (%q) was accepted", i, bad)
			}
		}
	}
	for _, bad := range []string{"", ".", "v1", UnsubscribeToken(key, Unsubscribe{Channel: ChannelEmail, Category: CategoryMarketing})} {
		if _, ok := ParseUnsubscribeToken(key, bad); ok {
			t.Fatalf("%q accepted", bad)
		}
	}
	if _, ok := ParseUnsubscribeToken(nil, tok); ok {
		t.Fatal("a nil key accepted a token")
	}
}
