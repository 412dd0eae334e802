package ddb

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"
)

func TestConnections(t *testing.T) {
	t.Parallel()
	db := testClient(t)
	ctx := context.Background()
	name := fmt.Sprintf("connections-%d", time.Now().UnixNano())
	if err := CreateConnectionsTable(ctx, db, name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Table(name).DeleteTable().Run(context.Background()) })
	cs := NewConnections(db, name)
	now := time.Now()
	for _, c := range []struct {
		id, user string
		at       time.Time
	}{{"a1", "alice", now}, {"a2", "alice", now}, {"b1", "bob", now}, {"old", "alice", now.Add(-3 * time.Hour)}} {
		if err := cs.Put(ctx, Connection{ID: c.id, User: c.user}, c.at); err != nil {
			t.Fatal(err)
		}
	}
	if u, live, err := cs.User(ctx, "a1", now); err != nil || !live || u != "alice" {
		t.Fatalf("User(a1) = %q %v %v", u, live, err)
	}
	// Past its TTL an item may linger until DynamoDB removes it: it is no longer live.
	if _, live, err := cs.User(ctx, "old", now); err != nil || live {
		t.Fatalf("User(old) live=%v %v, want not live", live, err)
	}
	if _, live, err := cs.User(ctx, "nope", now); err != nil || live {
		t.Fatalf("User(nope) live=%v %v", live, err)
	}
	var all []string
	if err := cs.Each(ctx, now, func(page []Connection) error {
		for _, c := range page {
			all = append(all, c.User+"/"+c.ID)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(all)
	if !slices.Equal(all, []string{"alice/a1", "alice/a2", "bob/b1"}) {
		t.Fatalf("Each = %v, want the three live connections", all)
	}
	if err := cs.Delete(ctx, "a2"); err != nil {
		t.Fatal(err)
	}
	if err := cs.Delete(ctx, "a2"); err != nil {
		t.Fatalf("deleting twice: %v", err)
	}
	ids, err := cs.ByUser(ctx, "alice")
	slices.Sort(ids)
	if err != nil || !slices.Equal(ids, []string{"a1", "old"}) {
		t.Fatalf("ByUser(alice) = %v %v, want a1 and old (the index does not judge expiry)", ids, err)
	}
}
