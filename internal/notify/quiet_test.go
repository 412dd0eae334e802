package notify_test

import (
	"errors"
	"testing"
	"time"

	"herald/internal/notify"
)

func seoul(t *testing.T) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation("Asia/Seoul")
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func TestIsQuietAt(t *testing.T) {
	t.Parallel()
	kst := seoul(t)
	night := notify.DefaultQuietHours()
	day := notify.QuietHours{Enabled: true, Start: "12:00", End: "13:30"}
	at := func(h, m int) time.Time { return time.Date(2026, 11, 30, h, m, 0, 0, kst) }
	cases := []struct {
		name string
		q    notify.QuietHours
		t    time.Time
		tz   string
		want bool
	}{
		{"before night window", night, at(20, 59), "", false},
		{"night window opens at start", night, at(21, 0), "", true},
		{"midnight", night, at(0, 0), "", true},
		{"last second before end", night, at(7, 59).Add(59 * time.Second), "", true},
		{"window ends at end", night, at(8, 0), "", false},
		{"noon", night, at(12, 0), "", false},
		{"day window inside", day, at(12, 45), "", true},
		{"day window end exclusive", day, at(13, 30), "", false},
		{"day window before", day, at(11, 59), "", false},
		{"recipient zone: 10:00 KST is 01:00 UTC in London", night, at(10, 0), "Europe/London", true},
		{"recipient zone: 22:00 KST is 08:00 in New York (EST)", night, at(22, 0), "America/New_York", false},
		{"unknown zone falls back to Seoul", night, at(23, 0), "Mars/Olympus", true},
		{"disabled never quiet", notify.QuietHours{Start: "21:00", End: "08:00"}, at(23, 0), "", false},
		{"empty window never quiet", notify.QuietHours{Enabled: true, Start: "08:00", End: "08:00"}, at(8, 0), "", false},
		{"malformed never quiet", notify.QuietHours{Enabled: true, Start: "9pm", End: "08:00"}, at(23, 0), "", false},
		{"policy zone used when recipient has none", notify.QuietHours{Enabled: true, Start: "21:00", End: "08:00", TimeZone: "UTC"}, at(23, 0), "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if got := c.q.IsQuietAt(c.t, c.tz); got != c.want {
				t.Errorf("IsQuietAt(%v, %q) = %v, want %v", c.t, c.tz, got, c.want)
			}
		})
	}
}

func TestNextOpen(t *testing.T) {
	t.Parallel()
	kst := seoul(t)
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	night := notify.DefaultQuietHours()
	cases := []struct {
		name string
		q    notify.QuietHours
		t    time.Time
		tz   string
		want time.Time
	}{
		{"open now", night, time.Date(2026, 11, 30, 12, 0, 0, 0, kst), "", time.Date(2026, 11, 30, 12, 0, 0, 0, kst)},
		{"evening: tomorrow 08:00", night, time.Date(2026, 11, 30, 21, 0, 0, 0, kst), "", time.Date(2026, 12, 1, 8, 0, 0, 0, kst)},
		{"after midnight: today 08:00", night, time.Date(2026, 12, 1, 3, 0, 0, 0, kst), "", time.Date(2026, 12, 1, 8, 0, 0, 0, kst)},
		{"year end wraps", night, time.Date(2026, 12, 31, 23, 0, 0, 0, kst), "", time.Date(2027, 1, 1, 8, 0, 0, 0, kst)},
		// 2026-03-08 02:00 New York springs forward: the night is 10h of wall time but 9h of real time.
		{"DST spring forward", night, time.Date(2026, 3, 7, 22, 0, 0, 0, ny), "America/New_York", time.Date(2026, 3, 8, 8, 0, 0, 0, ny)},
		// 2026-11-01 02:00 New York falls back: the night is 11h of wall time, 12h real.
		{"DST fall back", night, time.Date(2026, 10, 31, 21, 0, 0, 0, ny), "America/New_York", time.Date(2026, 11, 1, 8, 0, 0, 0, ny)},
		{"day window", notify.QuietHours{Enabled: true, Start: "12:00", End: "13:30"}, time.Date(2026, 11, 30, 12, 10, 0, 0, kst), "", time.Date(2026, 11, 30, 13, 30, 0, 0, kst)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got := c.q.NextOpen(c.t, c.tz)
			if !got.Equal(c.want) {
				t.Errorf("NextOpen(%v, %q) = %v, want %v", c.t, c.tz, got, c.want)
			}
			if c.q.IsQuietAt(got, c.tz) {
				t.Errorf("NextOpen(%v) = %v is still quiet", c.t, got)
			}
		})
	}
}

func TestMayDeliverNow(t *testing.T) {
	t.Parallel()
	kst := seoul(t)
	night := time.Date(2026, 11, 30, 23, 30, 0, 0, kst)
	noon := time.Date(2026, 11, 30, 12, 0, 0, 0, kst)
	consent := noon.AddDate(-1, 0, 0)
	q := notify.DefaultQuietHours()
	cases := []struct {
		name       string
		now        time.Time
		ch         notify.Channel
		cat        notify.Category
		p          notify.Preferences
		want       bool
		wantReason string
	}{
		{"marketing push at night", night, notify.ChannelPush, notify.CategoryMarketing, notify.Preferences{}, false, notify.ReasonQuietHours},
		{"marketing sms at night", night, notify.ChannelSMS, notify.CategoryMarketing, notify.Preferences{}, false, notify.ReasonQuietHours},
		{"marketing email is exempt", night, notify.ChannelEmail, notify.CategoryMarketing, notify.Preferences{}, true, ""},
		{"marketing inbox is exempt", night, notify.ChannelInbox, notify.CategoryMarketing, notify.Preferences{}, true, ""},
		{"transactional push is exempt", night, notify.ChannelPush, notify.CategoryTransactional, notify.Preferences{}, true, ""},
		{"night consent exempts", night, notify.ChannelPush, notify.CategoryMarketing, notify.Preferences{NightConsent: &consent}, true, ""},
		{"marketing push at noon", noon, notify.ChannelPush, notify.CategoryMarketing, notify.Preferences{}, true, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ok, reason := q.MayDeliverNow(c.now, c.ch, c.cat, "", c.p)
			if ok != c.want || reason != c.wantReason {
				t.Errorf("MayDeliverNow = (%v, %q), want (%v, %q)", ok, reason, c.want, c.wantReason)
			}
		})
	}
}

func TestQuietHoursValidate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		q     notify.QuietHours
		field string
	}{
		{notify.DefaultQuietHours(), ""},
		{notify.QuietHours{}, ""}, // disabled: nothing to check
		{notify.QuietHours{Enabled: true, Start: "24:00", End: "08:00"}, "quiet_hours.start"},
		{notify.QuietHours{Enabled: true, Start: "21:00", End: "8:00"}, "quiet_hours.end"},
		{notify.QuietHours{Enabled: true, Start: "21:00", End: "08:60"}, "quiet_hours.end"},
		{notify.QuietHours{Enabled: true, Start: "21:00", End: "08:00", TimeZone: "Nowhere/City"}, "quiet_hours.time_zone"},
	}
	for _, c := range cases {
		err := c.q.Validate()
		if c.field == "" {
			if err != nil {
				t.Errorf("Validate(%+v) = %v, want nil", c.q, err)
			}
			continue
		}
		var e *notify.Error
		if !notify.IsCode(err, notify.EINVALID) || !errors.As(err, &e) || e.Field != c.field {
			t.Errorf("Validate(%+v) = %v, want EINVALID on %s", c.q, err, c.field)
		}
	}
}

func TestAdTitle(t *testing.T) {
	t.Parallel()
	cases := []struct {
		cat    notify.Category
		title  string
		prefix bool
		want   string
	}{
		{notify.CategoryMarketing, "주말 세일", true, "(광고) 주말 세일"},
		{notify.CategoryMarketing, "(광고) 주말 세일", true, "(광고) 주말 세일"},
		{notify.CategoryMarketing, "", true, "(광고)"},
		{notify.CategoryMarketing, "주말 세일", false, "주말 세일"},
		{notify.CategoryTransactional, "배송 시작", true, "배송 시작"},
	}
	for _, c := range cases {
		if got := notify.AdTitle(c.cat, c.title, c.prefix); got != c.want {
			t.Errorf("AdTitle(%s, %q, %v) = %q, want %q", c.cat, c.title, c.prefix, got, c.want)
		}
	}
}

// Quiet hours' clock times are "HH:MM" from 00:00 to 23:59, nothing else.
func TestQuietHoursClockTimes(t *testing.T) {
	for _, c := range []struct {
		start string
		ok    bool
	}{
		{"00:00", true}, {"07:05", true}, {"23:59", true}, {"21:00", true},
		{"24:00", false}, {"23:60", false}, {"7:00", false}, {"07-00", false}, {"0a:00", false},
		{"-1:00", false}, {"07:0x", false}, {"", false}, {"07:000", false}, {" 7:00", false},
	} {
		err := notify.QuietHours{Enabled: true, Start: c.start, End: "08:30"}.Validate()
		if (err == nil) != c.ok {
			t.Errorf("start %q: %v, want ok=%v", c.start, err, c.ok)
		}
	}
	q := notify.QuietHours{Enabled: true, Start: "21:30", End: "08:05", TimeZone: "Asia/Seoul"}
	at := func(h, m int) time.Time { return time.Date(2026, 12, 1, h, m, 0, 0, seoul(t)) }
	for _, c := range []struct {
		h, m  int
		quiet bool
	}{{21, 29, false}, {21, 30, true}, {3, 0, true}, {8, 4, true}, {8, 5, false}, {12, 0, false}} {
		if got := q.IsQuietAt(at(c.h, c.m), ""); got != c.quiet {
			t.Errorf("%02d:%02d quiet=%v, want %v", c.h, c.m, got, c.quiet)
		}
	}
}
