package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"herald/internal/notify"
)

var keyClaimCases = []storeCase{
	{"ClaimKey/FirstWins", testClaimKeyFirstWins},
	{"ClaimKey/ScopedToService", testClaimKeyScopedToService},
	{"ClaimKey/Racing", testClaimKeyRacing},
	{"ClaimKey/Invalid", testClaimKeyInvalid},
}

func keyClaim(service, key, fingerprint string) notify.KeyClaim {
	return notify.KeyClaim{Service: service, Key: key, NotificationID: notify.NotificationIDFor(service, key, t0),
		Fingerprint: fingerprint, At: t0}
}

// testClaimKeyFirstWins: the first claim wins; a later one, with any fingerprint, is told the
// first's.
func testClaimKeyFirstWins(t *testing.T, s notify.Store) {
	first := keyClaim("billing", "order-1", "f1")
	held, won, err := s.ClaimKey(t.Context(), first)
	noErr(t, err)
	if !won || held.Fingerprint != "f1" || held.NotificationID != first.NotificationID {
		t.Fatalf("first claim = %+v won=%v, want f1 won", held, won)
	}
	for _, fp := range []string{"f1", "f2"} {
		later := keyClaim("billing", "order-1", fp)
		later.At = t0.Add(time.Minute)
		held, won, err = s.ClaimKey(t.Context(), later)
		noErr(t, err)
		if won || held.Fingerprint != "f1" || held.NotificationID != first.NotificationID || held.Service != "billing" || held.Key != "order-1" {
			t.Fatalf("claim with %s = %+v won=%v, want the first claim (f1), not won", fp, held, won)
		}
		sameTime(t, "At", held.At, t0)
	}
}

// testClaimKeyScopedToService: one key claimed by two services is two claims.
func testClaimKeyScopedToService(t *testing.T, s notify.Store) {
	for _, svc := range []string{"billing", "orders"} {
		held, won, err := s.ClaimKey(t.Context(), keyClaim(svc, "k", svc))
		noErr(t, err)
		if !won || held.Fingerprint != svc {
			t.Fatalf("claim of %s = %+v won=%v, want its own", svc, held, won)
		}
	}
}

// testClaimKeyRacing: of 50 racing claims with different fingerprints exactly one wins, and
// every other is told the winner's fingerprint.
func testClaimKeyRacing(t *testing.T, s notify.Store) {
	const racers = 50
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		wins  []string
		helds = map[string]int{}
		errs  []error
	)
	for i := range racers {
		wg.Go(func() {
			held, won, err := s.ClaimKey(t.Context(), keyClaim("billing", "race", fmt.Sprintf("f%02d", i)))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			if won {
				wins = append(wins, held.Fingerprint)
			}
			helds[held.Fingerprint]++
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d claims failed, first: %v", len(errs), errs[0])
	}
	if len(wins) != 1 || len(helds) != 1 || helds[wins[0]] != racers {
		t.Fatalf("winners %v, held fingerprints %v: want one winner whose claim all %d were told", wins, helds, racers)
	}
}

func testClaimKeyInvalid(t *testing.T, s notify.Store) {
	for _, k := range []notify.KeyClaim{
		{Key: "k", NotificationID: "n_1", Fingerprint: "f"},
		{Service: "billing", NotificationID: "n_1", Fingerprint: "f"},
		{Service: "billing", Key: "k", Fingerprint: "f"},
		{Service: "billing", Key: "k", NotificationID: "n_1"},
	} {
		_, _, err := s.ClaimKey(t.Context(), k)
		wantCode(t, err, notify.EINVALID)
	}
}
