package ddb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/guregu/dynamo/v2"

	"herald/internal/notify"
)

var _ notify.ExportStore = (*Store)(nil)

// ExportKeyPrefix starts the partition key of every export job item in the notifications table,
// so the export worker's role can be granted writes on keys with this prefix alone
// (dynamodb:LeadingKeys).
const ExportKeyPrefix = "EXPORT#"

const exportSK = "X"

// exportListPK is the partition listing every job, one item per job sorted by
// "<created_at nanos, 20 digits>#<id>" (ListExports): written with the job in one transaction
// and never changed, so a job's updates touch its own item only. It starts with ExportKeyPrefix,
// so the roles that may write jobs may write it, and cannot collide with a job's key (ids start
// "x_").
const exportListPK = ExportKeyPrefix + "LIST"

// exportListItem is one job's entry in the listing partition, kept as long as the job.
type exportListItem struct {
	PK  string `dynamo:"pk"`
	SK  string `dynamo:"sk"`
	ID  string `dynamo:"id"`
	TTL int64  `dynamo:"ttl"`
}

func exportListSK(j *notify.ExportJob) string {
	return fmt.Sprintf("%020d#%s", j.CreatedAt.UnixNano(), j.ID)
}

// exportItem is one job: the job as a JSON document (notify.ExportJob with its lease and file),
// a version every write conditions on, and a TTL a day past the job's retention (GetExport
// reports EXPIRED from ExpiresAt itself; DynamoDB's TTL only removes it later).
type exportItem struct {
	PK      string `dynamo:"pk"`
	SK      string `dynamo:"sk"`
	Doc     string `dynamo:"doc"`
	Version int64  `dynamo:"version"`
	TTL     int64  `dynamo:"ttl"`
}

type exportDoc struct {
	notify.ExportJob
	Object     string    `json:"object"`
	LeaseUntil time.Time `json:"lease_until"`
}

func exportPK(id string) string { return ExportKeyPrefix + id }

// readExport reads job id (consistently) with its version.
func (s *Store) readExport(ctx context.Context, id string) (*notify.ExportJob, int64, error) {
	var it exportItem
	err := s.db.Table(s.tables.Notifications).Get(attrPK, exportPK(id)).Range(attrSK, dynamo.Equal, exportSK).
		Consistent(true).One(ctx, &it)
	if errors.Is(err, dynamo.ErrNotFound) {
		return nil, 0, notify.Errorf(notify.ENOTFOUND, "export not found")
	}
	if err != nil {
		return nil, 0, err
	}
	j, err := s.decodeExport(it.Doc)
	if err != nil {
		return nil, 0, err
	}
	return j, it.Version, nil
}

// decodeExport reads a job's document; its Status is EXPIRED once past ExpiresAt.
func (s *Store) decodeExport(doc string) (*notify.ExportJob, error) {
	var d exportDoc
	if err := json.Unmarshal([]byte(doc), &d); err != nil {
		return nil, err
	}
	j := d.ExportJob
	j.Object, j.LeaseUntil = d.Object, d.LeaseUntil
	if !j.ExpiresAt.After(s.now()) {
		j.Status = notify.ExportExpired
	}
	return &j, nil
}

// putExport writes j as version+1, on condition the stored version is still version (0: absent).
func (s *Store) putExport(ctx context.Context, j *notify.ExportJob, version int64) error {
	doc, err := json.Marshal(exportDoc{ExportJob: *j, Object: j.Object, LeaseUntil: j.LeaseUntil})
	if err != nil {
		return err
	}
	put := s.db.Table(s.tables.Notifications).Put(exportItem{PK: exportPK(j.ID), SK: exportSK, Doc: string(doc),
		Version: version + 1, TTL: j.ExpiresAt.Add(24 * time.Hour).Unix()})
	if version == 0 {
		put = put.If("attribute_not_exists($)", attrPK)
	} else {
		put = put.If("$ = ?", "version", version)
	}
	return put.Run(ctx)
}

// CreateExport implements notify.ExportStore.
func (s *Store) CreateExport(ctx context.Context, j notify.ExportJob) (*notify.ExportJob, bool, error) {
	if j.ID == "" {
		return nil, false, wrapErr("create export", notify.FieldError("id", "is required"))
	}
	j.CreatedAt = s.nowOr(j.CreatedAt)
	j.UpdatedAt, j.ExpiresAt = j.CreatedAt, j.CreatedAt.Add(notify.ExportRetention)
	j.Status, j.Attempts, j.Rows, j.Bytes = notify.ExportPending, 0, 0, 0
	doc, err := json.Marshal(exportDoc{ExportJob: j})
	if err != nil {
		return nil, false, wrapErr("create export "+j.ID, err)
	}
	ttl := j.ExpiresAt.Add(24 * time.Hour).Unix()
	t := s.db.Table(s.tables.Notifications)
	err = s.db.WriteTx().
		Put(t.Put(exportItem{PK: exportPK(j.ID), SK: exportSK, Doc: string(doc), Version: 1, TTL: ttl}).If("attribute_not_exists($)", attrPK)).
		Put(t.Put(exportListItem{PK: exportListPK, SK: exportListSK(&j), ID: j.ID, TTL: ttl})).
		Run(ctx)
	if dynamo.IsCondCheckFailed(err) {
		got, _, err := s.readExport(ctx, j.ID)
		if err != nil {
			return nil, false, wrapErr("create export "+j.ID, err)
		}
		return got, false, nil
	}
	if err != nil {
		return nil, false, wrapErr("create export "+j.ID, err)
	}
	return &j, true, nil
}

// GetExport implements notify.ExportStore.
func (s *Store) GetExport(ctx context.Context, id string) (*notify.ExportJob, error) {
	j, _, err := s.readExport(ctx, id)
	if err != nil {
		return nil, wrapErr("get export "+id, err)
	}
	return j, nil
}

// updateExport applies fn to the stored job and writes it back on condition of its version,
// reading again when another writer got there first.
func (s *Store) updateExport(ctx context.Context, op, id string, fn func(j *notify.ExportJob) (bool, error)) (*notify.ExportJob, error) {
	for attempt := 0; ; attempt++ {
		j, v, err := s.readExport(ctx, id)
		if err != nil {
			return nil, wrapErr(op+" export "+id, err)
		}
		write, err := fn(j)
		if err != nil || !write {
			return j, wrapErr(op+" export "+id, err)
		}
		err = s.putExport(ctx, j, v)
		if dynamo.IsCondCheckFailed(err) && attempt+1 < txAttempts {
			if err := pause(ctx, attempt); err != nil {
				return nil, wrapErr(op+" export "+id, err)
			}
			continue
		}
		if err != nil {
			return nil, wrapErr(op+" export "+id, err)
		}
		return j, nil
	}
}

// ClaimExport implements notify.ExportStore.
func (s *Store) ClaimExport(ctx context.Context, id string, now, leaseUntil time.Time) (*notify.ExportJob, bool, error) {
	claimed := false
	j, err := s.updateExport(ctx, "claim", id, func(j *notify.ExportJob) (bool, error) {
		claimed = notify.ClaimExportJob(j, now, leaseUntil)
		return claimed, nil
	})
	if err != nil {
		return nil, false, err
	}
	return j, claimed, nil
}

// CheckpointExport implements notify.ExportStore.
func (s *Store) CheckpointExport(ctx context.Context, id string, attempt int, rows int64, leaseUntil time.Time) error {
	_, err := s.updateExport(ctx, "checkpoint", id, func(j *notify.ExportJob) (bool, error) {
		return true, notify.CheckpointExportJob(j, attempt, rows, leaseUntil, s.now())
	})
	return err
}

// FinishExport implements notify.ExportStore.
func (s *Store) FinishExport(ctx context.Context, id string, attempt int, r notify.ExportResult, at time.Time) error {
	_, err := s.updateExport(ctx, "finish", id, func(j *notify.ExportJob) (bool, error) {
		return true, notify.FinishExportJob(j, attempt, r, at)
	})
	return err
}

// CancelExport implements notify.ExportStore.
func (s *Store) CancelExport(ctx context.Context, id string, at time.Time) (*notify.ExportJob, error) {
	return s.updateExport(ctx, "cancel", id, func(j *notify.ExportJob) (bool, error) {
		return notify.CancelExportJob(j, at)
	})
}

// ListExports implements notify.ExportStore: a consistent Query of the listing partition,
// newest first, after the cursor (the last listed entry's sort key), then one consistent
// BatchGetItem of those jobs.
func (s *Store) ListExports(ctx context.Context, cursor string, limit int) ([]notify.ExportJob, string, error) {
	const op = "list exports"
	if limit < 1 || limit > notify.MaxExportPage {
		return nil, "", wrapErr(op, notify.FieldError("limit", "must be 1–%d", notify.MaxExportPage))
	}
	q := s.db.Table(s.tables.Notifications).Get(attrPK, exportListPK)
	if cursor != "" {
		at, id, ok := strings.Cut(cursor, "#")
		if _, err := strconv.ParseUint(at, 10, 64); err != nil || len(at) != 20 || !ok || !strings.HasPrefix(id, "x_") {
			return nil, "", wrapErr(op, notify.FieldError("cursor", "not a cursor this listing returned"))
		}
		q = q.Range(attrSK, dynamo.Less, cursor)
	}
	var entries []exportListItem
	if err := q.Order(dynamo.Descending).Consistent(true).Limit(limit+1).All(ctx, &entries); err != nil {
		return nil, "", wrapErr(op, err)
	}
	next := ""
	if len(entries) > limit {
		entries = entries[:limit]
		next = entries[limit-1].SK
	}
	if len(entries) == 0 {
		return nil, next, nil
	}
	keys := make([]dynamo.Keyed, len(entries))
	for i, e := range entries {
		keys[i] = dynamo.Keys{exportPK(e.ID), exportSK}
	}
	var items []exportItem
	err := s.db.Table(s.tables.Notifications).Batch(attrPK, attrSK).Get(keys...).Consistent(true).All(ctx, &items)
	if err != nil && !errors.Is(err, dynamo.ErrNotFound) {
		return nil, "", wrapErr(op, err)
	}
	byID := make(map[string]notify.ExportJob, len(items))
	for _, it := range items {
		j, err := s.decodeExport(it.Doc)
		if err != nil {
			return nil, "", wrapErr(op, fmt.Errorf("decode export %s: %w", it.PK, err))
		}
		byID[j.ID] = *j
	}
	out := make([]notify.ExportJob, 0, len(entries))
	for _, e := range entries {
		if j, ok := byID[e.ID]; ok { // a job removed by its TTL before its entry is skipped
			out = append(out, j)
		}
	}
	return out, next, nil
}
