package sqlite_test

import (
	"fmt"
	"testing"
	"time"

	"herald/internal/notify"
	"herald/internal/sqlite"
)

// TestRemainingBoundsALongRest: past the exact count's limit, Remaining answers the source's
// highest seq less the cursor's, which is never less than the members left.
func TestRemainingBoundsALongRest(t *testing.T) {
	t.Parallel()
	s, _ := openTestStore(t)
	ctx := t.Context()
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	// 30 devices of app "a", with 10 of app "b" registered between them.
	for i := range 40 {
		app := "a"
		if i%4 == 3 {
			app = "b"
		}
		if err := s.PutDevice(ctx, notify.Device{UserID: fmt.Sprintf("u%02d", i), Token: fmt.Sprintf("tok-%02d", i),
			App: app, Platform: notify.PlatformFCM, Environment: "production", UpdatedAt: at}); err != nil {
			t.Fatal(err)
		}
	}
	list := make([]string, 25)
	for i := range list {
		list[i] = fmt.Sprintf("l%02d", i)
	}
	if _, err := s.AppendAudienceList(ctx, "l", list); err != nil {
		t.Fatal(err)
	}
	aud := notify.Audience{Sources: []notify.Segment{{Kind: notify.AudienceAppDevices, App: "a"}, {Kind: notify.AudienceUserList, ListID: "l"}}}
	page, err := s.Page(ctx, aud, 0, 0, 5)
	if err != nil {
		t.Fatal(err)
	}
	after := page[len(page)-1].Seq
	for _, c := range []struct {
		source    int
		after     int64
		exactUpTo int
		low, high int // the answer must lie in [low, high]
	}{
		{0, after, 100, 25, 25}, // exact
		{0, after, 10, 33, 33},  // bounded: app a's last seq (39) less the cursor's (6), app b's 8 between them too
		{1, 0, 100, 25, 25},     // a list, exact
		{1, 0, 10, 25, 25},      // a list's seqs follow one another: the bound is exact
	} {
		n, err := sqlite.RemainingWithin(s, ctx, aud, c.source, c.after, c.exactUpTo)
		if err != nil || n < c.low || n > c.high {
			t.Fatalf("remaining(source %d, after %d, exact up to %d) = %d, %v; want %d to %d", c.source, c.after, c.exactUpTo, n, err, c.low, c.high)
		}
	}
}
