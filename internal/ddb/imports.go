package ddb

import (
	"context"
	"errors"
	"time"

	"github.com/guregu/dynamo/v2"

	"herald/internal/notify"
)

var _ notify.ImportStore = (*Store)(nil)

// importPK is the partition of an object's import markers in the users table: one item per
// object version (sk), see the package doc.
func importPK(object string) string { return "I#" + object }

// importItem is an object version's import marker.
type importItem struct {
	PK         string                  `dynamo:"pk"`
	SK         string                  `dynamo:"sk"`
	Owner      string                  `dynamo:"owner"`
	LeaseUntil int64                   `dynamo:"lease_until"` // unix ms
	Done       bool                    `dynamo:"done"`
	Checkpoint notify.ImportCheckpoint `dynamo:"checkpoint"`
	ListID     string                  `dynamo:"list_id"`
	UpdatedAt  time.Time               `dynamo:"updated_at"`
}

func (it importItem) marker(object string) notify.ImportMarker {
	return notify.ImportMarker{Object: object, Version: it.SK, ListID: it.ListID, Owner: it.Owner,
		LeaseUntil: time.UnixMilli(it.LeaseUntil).UTC(), Done: it.Done, Checkpoint: it.Checkpoint, UpdatedAt: it.UpdatedAt}
}

// ClaimImport implements notify.ImportStore: a consistent read of the marker, then a put
// conditioned on attribute_not_exists (a new marker) or on the lease having ended and the
// version not being done (a takeover), so two attempts never both win.
func (s *Store) ClaimImport(ctx context.Context, object, version, listID, owner string, now, leaseUntil time.Time) (notify.ImportMarker, error) {
	var it importItem
	err := s.users().Get(attrPK, importPK(object)).Range(attrSK, dynamo.Equal, version).Consistent(true).One(ctx, &it)
	isNew := errors.Is(err, dynamo.ErrNotFound)
	switch {
	case isNew:
		it = importItem{PK: importPK(object), SK: version, ListID: listID}
	case err != nil:
		return notify.ImportMarker{}, wrapErr("claim import: read marker", err)
	case it.Done:
		return it.marker(object), nil
	}
	it.Owner, it.LeaseUntil, it.UpdatedAt = owner, leaseUntil.UnixMilli(), now.UTC()
	put := s.users().Put(it)
	if isNew {
		put = put.If("attribute_not_exists($)", attrPK)
	} else {
		put = put.If("$ < ? AND $ = ?", "lease_until", now.UnixMilli(), "done", false)
	}
	if err := put.Run(ctx); err != nil {
		if dynamo.IsCondCheckFailed(err) {
			return notify.ImportMarker{}, notify.Errorf(notify.ECONFLICT, "ddb: claim import: another attempt holds the lease of %s %s", object, version)
		}
		return notify.ImportMarker{}, wrapErr("claim import", err)
	}
	return it.marker(object), nil
}

// SaveImportCheckpoint implements notify.ImportStore.
func (s *Store) SaveImportCheckpoint(ctx context.Context, object, version, owner string, cp notify.ImportCheckpoint, leaseUntil time.Time) error {
	u := s.users().Update(attrPK, importPK(object)).Range(attrSK, version).
		Set("checkpoint", cp).Set("lease_until", leaseUntil.UnixMilli()).Set("updated_at", s.now())
	return s.ownedImportUpdate(ctx, "save import checkpoint", u, object, version, owner)
}

// ReleaseImport implements notify.ImportStore.
func (s *Store) ReleaseImport(ctx context.Context, object, version, owner string) error {
	u := s.users().Update(attrPK, importPK(object)).Range(attrSK, version).Set("lease_until", 0).Set("updated_at", s.now())
	return s.ownedImportUpdate(ctx, "release import", u, object, version, owner)
}

// FinishImport implements notify.ImportStore.
func (s *Store) FinishImport(ctx context.Context, object, version, owner string, cp notify.ImportCheckpoint) error {
	u := s.users().Update(attrPK, importPK(object)).Range(attrSK, version).
		Set("checkpoint", cp).Set("done", true).Set("updated_at", s.now())
	return s.ownedImportUpdate(ctx, "finish import", u, object, version, owner)
}

// ownedImportUpdate runs u conditioned on owner holding the marker. A lost condition is read
// back to tell a missing marker (ENOTFOUND) from another owner's (ECONFLICT).
func (s *Store) ownedImportUpdate(ctx context.Context, op string, u *dynamo.Update, object, version, owner string) error {
	err := u.If("$ = ?", "owner", owner).Run(ctx)
	if !dynamo.IsCondCheckFailed(err) {
		return wrapErr(op, err)
	}
	var it importItem
	switch err := s.users().Get(attrPK, importPK(object)).Range(attrSK, dynamo.Equal, version).Consistent(true).One(ctx, &it); {
	case errors.Is(err, dynamo.ErrNotFound):
		return notify.Errorf(notify.ENOTFOUND, "ddb: %s: no import marker for %s %s", op, object, version)
	case err != nil:
		return wrapErr(op, err)
	}
	return notify.Errorf(notify.ECONFLICT, "ddb: %s: %s %s is held by another attempt", op, object, version)
}
