package notify

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"
	_ "time/tzdata" // zones must resolve on hosts without /usr/share/zoneinfo (Lambda, scratch images)
)

// DefaultTimeZone is the zone quiet hours are judged in when neither the recipient nor the
// policy names one.
const DefaultTimeZone = "Asia/Seoul"

// AdPrefix marks advertising titles, as Korean law (정보통신망법 §50) requires of ads.
const AdPrefix = "(광고)"

// QuietHours is a policy that holds marketing back during a daily window in the recipient's
// local time — by default 21:00–08:00, the window of 정보통신망법 §50 in which advertising needs
// separate night-time consent. Start and End are "HH:MM"; a window whose End is not after its
// Start wraps midnight. Validate refuses Start == End, which reads as both "never" and "always";
// one stored before is an empty window.
type QuietHours struct {
	Enabled  bool   `json:"enabled"`
	Start    string `json:"start,omitempty"`     // "21:00"
	End      string `json:"end,omitempty"`       // "08:00"
	TimeZone string `json:"time_zone,omitempty"` // used when the recipient has none; default Asia/Seoul
}

// DefaultQuietHours is the policy a marketing campaign gets unless it says otherwise.
func DefaultQuietHours() QuietHours {
	return QuietHours{Enabled: true, Start: "21:00", End: "08:00", TimeZone: DefaultTimeZone}
}

// UnmarshalJSON reads a policy as a caller writes it: given at all, it holds unless it says
// "enabled": false — {"start": "22:00"} is a window, never a silently disabled one — and a start
// or end left out is the law's (21:00, 08:00). Unknown keys are refused, naming the key (a
// field relative to the policy: the decoder that called this knows where the policy is).
func (q *QuietHours) UnmarshalJSON(b []byte) error {
	type plain QuietHours
	p := plain{Enabled: true}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(b, &keys); err != nil {
		return err
	}
	for k := range keys {
		switch k {
		case "enabled", "start", "end", "time_zone":
		default:
			return FieldError(k, "unknown field %q (keys: enabled, start, end, time_zone)", k)
		}
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	if p.Enabled {
		d := DefaultQuietHours()
		if p.Start == "" {
			p.Start = d.Start
		}
		if p.End == "" {
			p.End = d.End
		}
	}
	*q = QuietHours(p)
	return nil
}

// Validate reports every problem with the policy as EINVALID errors naming the field. What a
// disabled policy gives is checked too: a typo there would come back when it is enabled.
func (q QuietHours) Validate() error {
	if !q.Enabled {
		if q.Start != "" {
			if _, err := parseClock(q.Start); err != nil {
				return FieldError("quiet_hours.start", "%v", err)
			}
		}
		if q.End != "" {
			if _, err := parseClock(q.End); err != nil {
				return FieldError("quiet_hours.end", "%v", err)
			}
		}
		if q.TimeZone != "" && q.TimeZone != DefaultTimeZone {
			if _, err := loadZone(q.TimeZone); err != nil {
				return FieldError("quiet_hours.time_zone", "unknown time zone %q", q.TimeZone)
			}
		}
		return nil
	}
	if _, err := parseClock(q.Start); err != nil {
		return FieldError("quiet_hours.start", "%v", err)
	}
	if _, err := parseClock(q.End); err != nil {
		return FieldError("quiet_hours.end", "%v", err)
	}
	if q.Start == q.End {
		return FieldError("quiet_hours.end", "equals start (%s): give a window, or {\"enabled\": false} for none", q.Start)
	}
	if q.TimeZone != "" {
		if _, err := loadZone(q.TimeZone); err != nil {
			return FieldError("quiet_hours.time_zone", "unknown time zone %q", q.TimeZone)
		}
	}
	return nil
}

// IsQuietAt reports whether t falls inside the window in zone tz (the recipient's zone; "" means
// the policy's zone, then Asia/Seoul). An unknown zone falls back the same way, so a bad zone
// on one device never lets an ad through at night. A disabled or malformed policy is never quiet.
func (q QuietHours) IsQuietAt(t time.Time, tz string) bool {
	start, end, ok := q.bounds()
	if !ok {
		return false
	}
	local := t.In(q.zone(tz))
	m := local.Hour()*60 + local.Minute()
	if start < end {
		return m >= start && m < end
	}
	return m >= start || m < end // wraps midnight
}

// NextOpen returns when sending may resume: t itself when t is not quiet, otherwise the window's
// end in zone tz. The end is built from the local calendar date (time.Date), not by adding 24h,
// so a DST change inside the window still lands on the local End.
func (q QuietHours) NextOpen(t time.Time, tz string) time.Time {
	if !q.IsQuietAt(t, tz) {
		return t
	}
	_, end, _ := q.bounds()
	loc := q.zone(tz)
	local := t.In(loc)
	y, mo, d := local.Date()
	open := time.Date(y, mo, d, end/60, end%60, 0, 0, loc)
	if !open.After(t) { // evening part of a window that wraps midnight: it ends tomorrow
		open = time.Date(y, mo, d+1, end/60, end%60, 0, 0, loc)
	}
	return open
}

// MayDeliverNow decides whether a message of category cat may go on channel ch to a recipient
// in zone tz with preferences p at now. Only marketing is held; email is exempt (the law's
// night-time rule does not cover it), and so is the in-app inbox, which is read when the user
// opens the app and wakes nobody. Recipients with night-time consent are exempt. When it says
// no, the reason is ReasonQuietHours and NextOpen says when to try again.
func (q QuietHours) MayDeliverNow(now time.Time, ch Channel, cat Category, tz string, p Preferences) (bool, string) {
	if cat != CategoryMarketing || ch == ChannelEmail || ch == ChannelInbox {
		return true, ""
	}
	if p.NightConsent != nil {
		return true, ""
	}
	if q.IsQuietAt(now, tz) {
		return false, ReasonQuietHours
	}
	return true, ""
}

// AdTitle returns title with the "(광고)" prefix when a marketing message is configured to
// carry it; a title that already starts with the prefix is left alone, so applying it twice
// (a retried step) never yields "(광고) (광고)".
func AdTitle(cat Category, title string, prefix bool) string {
	if !prefix || cat != CategoryMarketing || strings.HasPrefix(title, AdPrefix) {
		return title
	}
	if title == "" {
		return AdPrefix
	}
	return AdPrefix + " " + title
}

// bounds returns the window in minutes of the day.
func (q QuietHours) bounds() (start, end int, ok bool) {
	if !q.Enabled {
		return 0, 0, false
	}
	s, err1 := parseClock(q.Start)
	e, err2 := parseClock(q.End)
	if err1 != nil || err2 != nil || s == e {
		return 0, 0, false
	}
	return s, e, true
}

// zone resolves the recipient's zone, then the policy's, then Asia/Seoul.
func (q QuietHours) zone(tz string) *time.Location {
	for _, name := range []string{tz, q.TimeZone, DefaultTimeZone} {
		if name == "" {
			continue
		}
		if loc, err := loadZone(name); err == nil {
			return loc
		}
	}
	return time.UTC // unreachable: tzdata is embedded
}

// parseClock parses "HH:MM" into minutes of the day.
func parseClock(s string) (int, error) {
	if len(s) != 5 || s[2] != ':' {
		return 0, fmt.Errorf("time %q is not HH:MM", s)
	}
	// By hand, not fmt.Sscanf: prepare judges every recipient of a marketing send with this.
	digit := func(c byte) (int, bool) { return int(c - '0'), c >= '0' && c <= '9' }
	h1, ok1 := digit(s[0])
	h2, ok2 := digit(s[1])
	m1, ok3 := digit(s[3])
	m2, ok4 := digit(s[4])
	h, m := h1*10+h2, m1*10+m2
	if !ok1 || !ok2 || !ok3 || !ok4 || h > 23 || m > 59 {
		return 0, fmt.Errorf("time %q is not HH:MM between 00:00 and 23:59", s)
	}
	return h*60 + m, nil
}

var zones sync.Map // name → *time.Location; LoadLocation parses tzdata on every call

func loadZone(name string) (*time.Location, error) {
	if loc, ok := zones.Load(name); ok {
		return loc.(*time.Location), nil
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, err
	}
	zones.Store(name, loc)
	return loc, nil
}
