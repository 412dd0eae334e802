package export

import (
	"context"
	"fmt"

	"herald/internal/notify"
)

// Addresses is what an unmasked deliveries export reads to find each delivery's address, which
// no store keeps: the notification's recipients, and its users' contacts and devices as they are
// now (notify.Store has all three).
type Addresses interface {
	GetRecipients(ctx context.Context, id string, offset, limit int) ([]notify.Recipient, error)
	ListDevices(ctx context.Context, userIDs []string) (map[string][]notify.Device, error)
	GetContacts(ctx context.Context, userIDs []string) (map[string]notify.Contact, error)
}

// addressPage is how many recipients addressIndex reads at a time.
const addressPage = 500

// addressIndex maps the delivery ids of notification n to the addresses they were made from.
// A delivery id is a hash of the notification, the channel and the address the prepare stage
// used (notify.DeliveryID), so an address is recovered exactly by hashing every candidate the
// way prepare builds them: each recipient's direct address, and each user's current contacts and
// devices. A delivery whose address the user has changed or removed since is not found, and stays
// masked: nothing is guessed.
func addressIndex(ctx context.Context, a Addresses, n *notify.Notification) (map[string]string, error) {
	idx := map[string]string{}
	add := func(ch notify.Channel, address string) string {
		if address == "" || !n.HasChannel(ch) {
			return ""
		}
		id := notify.DeliveryID(n.ID, ch, address)
		idx[id] = address
		return id
	}
	phone := func(p string) {
		add(notify.ChannelSMS, p)
		if n.HasChannel(notify.ChannelAlimTalk) {
			national, err := notify.NormalizeKoreanMobile(p)
			if err != nil {
				national = p // refused as unsupported, under the number as given
			}
			if id := add(notify.ChannelAlimTalk, national); id != "" {
				// Its SMS/LMS fallback goes to the same number (pipeline fallback ids).
				idx[notify.DeliveryID(n.ID, notify.ChannelSMS, "alimtalk-fallback:"+id)] = p
			}
		}
	}
	for offset := 0; ; offset += addressPage {
		rs, err := a.GetRecipients(ctx, n.ID, offset, addressPage)
		if err != nil {
			return nil, fmt.Errorf("recipients of %s: %w", n.ID, err)
		}
		var users []string
		for _, r := range rs {
			if r.UserID != "" {
				users = append(users, r.UserID)
				add(notify.ChannelInbox, r.UserID)
				continue
			}
			add(notify.ChannelEmail, r.Email)
			phone(r.Phone)
			add(notify.ChannelPush, r.FCMToken)
			add(notify.ChannelPush, r.APNsToken)
		}
		if len(users) > 0 {
			devices, err := a.ListDevices(ctx, users)
			if err != nil {
				return nil, fmt.Errorf("devices of %s's recipients: %w", n.ID, err)
			}
			for _, ds := range devices {
				for _, d := range ds {
					add(notify.ChannelPush, d.Token)
				}
			}
			contacts, err := a.GetContacts(ctx, users)
			if err != nil {
				return nil, fmt.Errorf("contacts of %s's recipients: %w", n.ID, err)
			}
			for _, c := range contacts {
				add(notify.ChannelEmail, c.Email)
				if c.Phone != "" {
					phone(c.Phone)
				}
			}
		}
		if len(rs) < addressPage {
			return idx, nil
		}
	}
}
