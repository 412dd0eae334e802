package notify

import (
	"context"
	"strings"
)

// AddressFinder finds the user an address belongs to, for the recipient view's search by
// address: a push token's owner (the user it was last registered to), or the user whose contact
// holds an email or a phone number. Contacts are sealed, so a store keeps the owner of each
// contact address under its AddressKey (a hash), written with the contact: a contact stored
// before a store kept them is found after its next change. ENOTFOUND when no user has it.
type AddressFinder interface {
	UserByAddress(ctx context.Context, c Channel, address string) (string, error)
}

// ContactKeys are the AddressKeys of c's email and phone, the keys a store files its owner under.
func ContactKeys(c Contact) []string {
	var keys []string
	if c.Email != "" {
		keys = append(keys, AddressKey(ChannelEmail, c.Email))
	}
	if c.Phone != "" {
		keys = append(keys, AddressKey(ChannelSMS, c.Phone))
	}
	return keys
}

// AddressChannel guesses the channel of an address an operator typed: an email has an @, a phone
// number is a + and digits (spaces, dashes, dots and parentheses dropped, as people write them),
// anything else is a push token. It returns the address as stores keep it.
func AddressChannel(address string) (Channel, string) {
	a := strings.TrimSpace(address)
	switch {
	case strings.Contains(a, "@"):
		return ChannelEmail, NormalizeAddress(ChannelEmail, a)
	case strings.HasPrefix(a, "+"):
		phone := strings.Map(func(r rune) rune {
			if strings.ContainsRune(" -.()", r) {
				return -1
			}
			return r
		}, a)
		if len(phone) > 1 && strings.Trim(phone[1:], "0123456789") == "" {
			return ChannelSMS, phone
		}
	}
	return ChannelPush, a
}
