package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"herald/internal/notify"
	"herald/internal/notify/campaigntest"
)

func TestCampaignStore(t *testing.T) {
	t.Parallel()
	campaigntest.Run(t, func(t *testing.T) campaigntest.Store {
		s, _ := openTestStore(t)
		return s
	})
}

// TestCampaignMigrationBackfillsDeviceIndex: a database from before campaigns (schema 2) gets the
// device index filled from its devices, oldest registration first, and kept in step afterwards.
func TestCampaignMigrationBackfillsDeviceIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "herald.db")
	open := storeAt(t, path)
	s, db := open()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, u := range []string{"old", "older", "newest"} {
		at := map[string]time.Time{"older": base, "old": base.Add(time.Hour), "newest": base.Add(2 * time.Hour)}[u]
		if err := s.PutDevice(ctx, notify.Device{UserID: u, Token: fmt.Sprintf("tok-%d", i), App: "shop",
			Platform: notify.PlatformFCM, UpdatedAt: at}); err != nil {
			t.Fatal(err)
		}
	}
	// Turn the file back into a schema-2 database.
	for _, q := range []string{
		`DROP TRIGGER devices_audience_insert`, `DROP TRIGGER devices_audience_update`, `DROP TRIGGER devices_audience_delete`,
		`DROP TABLE audience_devices`, `DROP TABLE audience_lists`, `DROP TABLE campaigns`,
		`UPDATE store_meta SET value = 2 WHERE key = 'schema_version'`,
	} {
		if _, err := db.W.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()

	s, db = open()
	defer db.Close()
	a := notify.Audience{Sources: []notify.Segment{{Kind: notify.AudienceAppDevices, App: "shop"}}}
	if err := s.PutDevice(ctx, notify.Device{UserID: "after", Token: "tok-after", App: "shop", Platform: notify.PlatformFCM}); err != nil {
		t.Fatal(err)
	}
	ms, err := s.Page(ctx, a, 0, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range ms {
		got = append(got, m.UserID)
	}
	if want := "older old newest after"; strings.Join(got, " ") != want {
		t.Fatalf("members after upgrade = %v, want %s", got, want)
	}
}
