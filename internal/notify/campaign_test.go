package notify_test

import (
	"testing"

	"herald/internal/notify"
)

func TestCampaignApplyDefaults(t *testing.T) {
	t.Parallel()
	c := notify.Campaign{
		AdPrefix: true,
		Notification: notify.Notification{
			Category:       notify.CategoryMarketing,
			Content:        notify.Content{Title: "주말 세일", Body: "30%"},
			ChannelContent: map[notify.Channel]notify.Content{notify.ChannelSMS: {Body: "sms only"}, notify.ChannelPush: {Title: "푸시"}},
			Localized:      map[string]notify.Content{"en": {Title: "Weekend sale"}},
		},
	}
	c.ApplyDefaults()
	c.ApplyDefaults() // idempotent
	n := c.Notification
	if n.Content.Title != "(광고) 주말 세일" || n.ChannelContent[notify.ChannelPush].Title != "(광고) 푸시" ||
		n.Localized["en"].Title != "(광고) Weekend sale" || n.ChannelContent[notify.ChannelSMS].Title != "" {
		t.Fatalf("titles = %q %q %q %q", n.Content.Title, n.ChannelContent[notify.ChannelPush].Title,
			n.Localized["en"].Title, n.ChannelContent[notify.ChannelSMS].Title)
	}
	if c.QuietHours != notify.DefaultQuietHours() {
		t.Fatalf("quiet hours = %+v, want the default", c.QuietHours)
	}

	tx := notify.Campaign{AdPrefix: true, Notification: notify.Notification{Category: notify.CategoryTransactional,
		Content: notify.Content{Title: "점검 안내"}}}
	tx.ApplyDefaults()
	if tx.Notification.Content.Title != "점검 안내" || tx.QuietHours.Enabled {
		t.Fatalf("transactional campaign changed: %q %+v", tx.Notification.Content.Title, tx.QuietHours)
	}

	off := notify.Campaign{Notification: notify.Notification{Category: notify.CategoryMarketing},
		QuietHours: notify.QuietHours{Start: "21:00", End: "08:00"}}
	off.ApplyDefaults()
	if off.QuietHours.Enabled {
		t.Fatal("an explicit disabled policy was turned on")
	}
}

func TestCampaignValidate(t *testing.T) {
	t.Parallel()
	c := notify.Campaign{
		Notification: notify.Notification{Category: "promo", Channels: []notify.Channel{"fax"}},
		Audience: notify.Audience{Sources: []notify.Segment{{Kind: notify.AudienceAppDevices},
			{Kind: notify.AudienceUserList}, {Kind: "segment"}}},
		QuietHours: notify.QuietHours{Enabled: true, Start: "25:00", End: "08:00"},
		MaxRate:    -1,
	}
	err := c.Validate()
	for _, field := range []string{"id", "service", "channels[0]", "category", "max_rate", "audience.sources[0].app",
		"audience.sources[1].list_id", "audience.sources[2].kind", "quiet_hours.start"} {
		if err == nil || !containsField(err, field) {
			t.Errorf("Validate() = %v, want a problem with %s", err, field)
		}
	}
	if err := (&notify.Campaign{Audience: notify.Audience{}}).Audience.Validate(); !notify.IsCode(err, notify.EINVALID) {
		t.Errorf("empty audience: %v, want EINVALID", err)
	}
}

// containsField reports whether err (possibly joined) has an *notify.Error naming field.
func containsField(err error, field string) bool {
	if e, ok := err.(*notify.Error); ok {
		return e.Field == field
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, x := range j.Unwrap() {
			if containsField(x, field) {
				return true
			}
		}
	}
	return false
}
