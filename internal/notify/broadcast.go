package notify

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Broadcast is an inbox entry stored once for a whole app audience and merged into the inbox
// reads of every user it targets (fan-out on read, docs/design.md §6 and §10): a campaign to a
// million devices writes one broadcast instead of a million inbox items, and a user costs a write
// only when they read or delete it (a per-user marker).
//
// Targeting is decided when the inbox is read, from the user's devices and preferences as they
// are then: a user sees the broadcast while they have a device that matches one of Targets (and,
// for a target that requires it, marketing consent) and their preferences allow Category in the
// inbox. A device registered after the campaign therefore sees it too, and a user who removes
// their last matching device stops seeing it.
type Broadcast struct {
	ID        string            `json:"id"` // the notification id: the inbox item id users see
	Service   string            `json:"service"`
	Category  Category          `json:"category"`
	Title     string            `json:"title,omitempty"`
	Body      string            `json:"body,omitempty"`
	Data      map[string]string `json:"data,omitempty"`
	Link      string            `json:"link,omitempty"`
	ImageURL  string            `json:"image_url,omitempty"`
	CreatedAt time.Time         `json:"created_at"`
	ExpiresAt *time.Time        `json:"expires_at,omitempty"`
	// Targets are the app-devices audience sources the broadcast stands for; a user matching any
	// one of them sees it once. One broadcast per notification covers every source, since the
	// inbox item id is the notification id.
	Targets []BroadcastTarget `json:"targets"`
}

// BroadcastTarget is one app-devices source: the app's devices, optionally filtered as the
// campaign's Segment filters them.
type BroadcastTarget struct {
	App              string   `json:"app"`
	Platform         Platform `json:"platform,omitempty"`          // only this platform
	Locale           string   `json:"locale,omitempty"`            // only this locale ("ko" also matches "ko-KR")
	MarketingConsent bool     `json:"marketing_consent,omitempty"` // only users who consented to marketing
}

// TargetOf is the broadcast target of an app-devices segment.
func TargetOf(s Segment) BroadcastTarget {
	return BroadcastTarget{App: s.App, Platform: s.Platform, Locale: s.Locale, MarketingConsent: s.MarketingConsent}
}

// Validate reports every problem with a broadcast to be stored.
func (b Broadcast) Validate() error {
	var errs []error
	if b.ID == "" {
		errs = append(errs, FieldError("id", "is required"))
	}
	if len(b.Targets) == 0 {
		errs = append(errs, FieldError("targets", "at least one target is required"))
	}
	for i, t := range b.Targets {
		if t.App == "" {
			errs = append(errs, FieldError(fmt.Sprintf("targets[%d].app", i), "is required"))
		}
		if t.Platform != "" && !t.Platform.Valid() {
			errs = append(errs, FieldError(fmt.Sprintf("targets[%d].platform", i), "unknown platform %q (fcm, apns, webpush)", t.Platform))
		}
	}
	return errors.Join(errs...)
}

// Apps returns the distinct apps of the targets, sorted.
func (b Broadcast) Apps() []string {
	apps := make([]string, 0, len(b.Targets))
	for _, t := range b.Targets {
		apps = append(apps, t.App)
	}
	slices.Sort(apps)
	return slices.Compact(apps)
}

// VisibleAt reports whether the broadcast has not expired at now.
func (b Broadcast) VisibleAt(now time.Time) bool {
	return b.ExpiresAt == nil || b.ExpiresAt.After(now)
}

// Reaches reports whether a user with devices and preferences p is targeted: one of their
// devices matches a target (whose consent requirement p meets), and p allows the broadcast's
// category in the inbox.
func (b Broadcast) Reaches(devices []Device, p Preferences) bool {
	if ok, _ := p.Allows(ChannelInbox, b.Category); !ok {
		return false
	}
	for _, t := range b.Targets {
		if t.MarketingConsent && p.MarketingConsent == nil {
			continue
		}
		for _, d := range devices {
			if t.matches(d) {
				return true
			}
		}
	}
	return false
}

func (t BroadcastTarget) matches(d Device) bool {
	return d.App == t.App && (t.Platform == "" || d.Platform == t.Platform) &&
		LocaleMatches(t.Locale, d.Locale)
}

// Item is the broadcast as userID's inbox item, read at readAt (nil: unread).
func (b Broadcast) Item(userID string, readAt *time.Time) InboxItem {
	return InboxItem{UserID: userID, ID: b.ID, Service: b.Service, Category: b.Category, Title: b.Title, Body: b.Body,
		Data: b.Data, Link: b.Link, ImageURL: b.ImageURL, CreatedAt: b.CreatedAt, ReadAt: readAt, ExpiresAt: b.ExpiresAt}
}

// CompareInbox orders inbox items as ListInbox returns them: CreatedAt descending, then ID
// descending.
func CompareInbox(a, b InboxItem) int {
	if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
		return c
	}
	return cmp.Compare(b.ID, a.ID)
}

// MergeInbox merges one page of a user's own items (the next limit+1 after the cursor, in
// CompareInbox order) with every visible broadcast after the cursor (in any order), and returns
// the first limit of the union and whether more follow. Own items are read one page at a time
// and broadcasts are few, so a page of the merged inbox costs what a page of own items does.
func MergeInbox(own, broadcasts []InboxItem, limit int) (page []InboxItem, more bool) {
	all := make([]InboxItem, 0, len(own)+len(broadcasts))
	all = append(all, own...)
	all = append(all, broadcasts...)
	slices.SortFunc(all, CompareInbox)
	if len(all) > limit {
		return all[:limit], true
	}
	return all, false
}

// LocaleMatches reports whether a device's locale passes an audience's locale filter: no filter,
// the same locale, or a region of the filter's language ("ko" matches "ko-KR", not "kor").
func LocaleMatches(filter, locale string) bool {
	return filter == "" || locale == filter || strings.HasPrefix(locale, filter+"-")
}
