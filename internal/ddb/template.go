package ddb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/guregu/dynamo/v2"

	"herald/internal/notify"
)

var _ notify.TemplateStore = (*Store)(nil)

// Templates live in the notifications table (see the package doc): one item per version under
// the template's partition, and one listing entry per template, under the service's listing
// partition, whose sort key is the latest version's creation time.
const skTemplateVersion = "V#"

// templatePK is the partition of one template's versions. A name never holds '#', so the last
// one separates it from the service.
func templatePK(service, name string) string { return "TPL#" + service + "#" + name }

// templateListingPK is the partition of a service's listing entries.
func templateListingPK(service string) string { return "TPLS#" + service }

func templateVersionSK(v int) string { return fmt.Sprintf("%s%010d", skTemplateVersion, v) }

// templateItem is one stored version: the notify.Template as JSON in doc.
type templateItem struct {
	PK        string `dynamo:"pk"`
	SK        string `dynamo:"sk"`
	Version   int    `dynamo:"version"`
	CreatedAt int64  `dynamo:"created_at"`
	Doc       string `dynamo:"doc"`
}

// templateListingItem points at a template's latest version; sk is listingSK(created_at, name).
type templateListingItem struct {
	PK      string `dynamo:"pk"`
	SK      string `dynamo:"sk"`
	Name    string `dynamo:"name"`
	Version int    `dynamo:"version"`
}

func (it templateItem) template() (*notify.Template, error) {
	var t notify.Template
	if err := json.Unmarshal([]byte(it.Doc), &t); err != nil {
		return nil, fmt.Errorf("decode template %s: %w", it.PK, err)
	}
	return &t, nil
}

// maxTemplatePutRounds bounds how often a put re-reads the latest version after losing the race
// for the next one: each round, one of the racing puts wins.
const maxTemplatePutRounds = 64

// PutTemplateVersion implements notify.TemplateStore: a consistent read of the latest version,
// then one transaction of the next version's item (attribute_not_exists — the atomic
// assignment), the listing entry's move to the new creation time. A put that loses the
// condition to a concurrent one reads again and takes the version after.
func (s *Store) PutTemplateVersion(ctx context.Context, t *notify.Template) (*notify.Template, error) {
	op := "put template " + t.Name
	if t.Service == "" || t.Name == "" || strings.Contains(t.Name, "#") {
		return nil, wrapErr(op, notify.Errorf(notify.EINVALID, "a template needs a service and a name without '#'"))
	}
	c := *t
	c.CreatedAt = s.nowOr(c.CreatedAt)
	table := s.tables.Notifications
	for round, attempt := 0, 0; ; {
		latest, err := s.latestTemplate(ctx, c.Service, c.Name)
		if err != nil && !notify.IsCode(err, notify.ENOTFOUND) {
			return nil, wrapErr(op, err)
		}
		c.Version = 1
		if latest != nil {
			c.Version = latest.Version + 1
		}
		doc, err := json.Marshal(&c)
		if err != nil {
			return nil, wrapErr(op, fmt.Errorf("encode: %w", err))
		}
		put, err := s.putIfAbsent(table, templateItem{PK: templatePK(c.Service, c.Name), SK: templateVersionSK(c.Version),
			Version: c.Version, CreatedAt: nanos(c.CreatedAt), Doc: string(doc)})
		if err != nil {
			return nil, wrapErr(op, err)
		}
		newSK := listingSK(nanos(c.CreatedAt), c.Name)
		listing, err := dynamo.MarshalItem(templateListingItem{PK: templateListingPK(c.Service), SK: newSK, Name: c.Name, Version: c.Version})
		if err != nil {
			return nil, wrapErr(op, err)
		}
		tx := []types.TransactWriteItem{put, {Put: &types.Put{TableName: aws.String(table), Item: listing}}}
		if latest != nil {
			if oldSK := listingSK(nanos(latest.CreatedAt), c.Name); oldSK != newSK {
				tx = append(tx, types.TransactWriteItem{Delete: &types.Delete{TableName: aws.String(table), Key: map[string]types.AttributeValue{
					attrPK: &types.AttributeValueMemberS{Value: templateListingPK(c.Service)},
					attrSK: &types.AttributeValueMemberS{Value: oldSK},
				}}})
			}
		}
		err = s.transact(ctx, tx)
		if err == nil {
			return &c, nil
		}
		reasons, canceled := cancelReasons(err)
		switch {
		case canceled && reasonCode(reasons, 0) == "ConditionalCheckFailed":
			if round++; round >= maxTemplatePutRounds {
				return nil, wrapErr(op, err)
			}
		case worthRetry(err, reasons, canceled) && attempt+1 < txAttempts:
			if err := pause(ctx, attempt); err != nil {
				return nil, wrapErr(op, err)
			}
			attempt++
		default:
			return nil, wrapErr(op, err)
		}
	}
}

// latestTemplate reads the highest version of (service, name) consistently.
func (s *Store) latestTemplate(ctx context.Context, service, name string) (*notify.Template, error) {
	var it templateItem
	err := s.db.Table(s.tables.Notifications).Get(attrPK, templatePK(service, name)).
		Range(attrSK, dynamo.BeginsWith, skTemplateVersion).Order(dynamo.Descending).Limit(1).Consistent(true).One(ctx, &it)
	if errors.Is(err, dynamo.ErrNotFound) {
		return nil, notify.Errorf(notify.ENOTFOUND, "template not found")
	}
	if err != nil {
		return nil, err
	}
	return it.template()
}

// GetTemplate implements notify.TemplateStore: one GetItem, or for the latest a Query of the
// template's partition, newest first, limit 1.
func (s *Store) GetTemplate(ctx context.Context, service, name string, version int) (*notify.Template, error) {
	op := "get template " + name
	if strings.Contains(name, "#") {
		return nil, wrapErr(op, notify.Errorf(notify.ENOTFOUND, "template not found"))
	}
	if version == 0 {
		t, err := s.latestTemplate(ctx, service, name)
		return t, wrapErr(op, err)
	}
	var it templateItem
	err := s.db.Table(s.tables.Notifications).Get(attrPK, templatePK(service, name)).
		Range(attrSK, dynamo.Equal, templateVersionSK(version)).Consistent(true).One(ctx, &it)
	if errors.Is(err, dynamo.ErrNotFound) {
		return nil, wrapErr(op, notify.Errorf(notify.ENOTFOUND, "template version not found"))
	}
	if err != nil {
		return nil, wrapErr(op, err)
	}
	t, err := it.template()
	return t, wrapErr(op, err)
}

// ListTemplates implements notify.TemplateStore: a Query of the service's listing partition,
// newest first, from below the cursor (the last entry's sort key), then one BatchGetItem of the
// versions the entries name.
func (s *Store) ListTemplates(ctx context.Context, service, cursor string, limit int) ([]notify.Template, string, error) {
	op := "list templates"
	if limit <= 0 {
		limit = 50
	}
	limit = min(limit, batchGetMax)
	q := s.db.Table(s.tables.Notifications).Get(attrPK, templateListingPK(service)).Order(dynamo.Descending).Limit(limit + 1).Consistent(true)
	if cursor != "" {
		if len(cursor) < 22 || cursor[20] != '#' {
			return nil, "", notify.FieldError("cursor", "malformed cursor")
		}
		q = q.Range(attrSK, dynamo.Less, cursor)
	}
	var entries []templateListingItem
	if err := q.All(ctx, &entries); err != nil {
		return nil, "", wrapErr(op, err)
	}
	next := ""
	if len(entries) > limit {
		entries = entries[:limit]
		next = entries[limit-1].SK
	}
	out := []notify.Template{}
	if len(entries) == 0 {
		return out, "", nil
	}
	keys := make([]dynamo.Keyed, 0, len(entries))
	order := map[string]int{}
	for i, e := range entries {
		pk := templatePK(service, e.Name)
		order[pk] = i
		keys = append(keys, dynamo.Keys{pk, templateVersionSK(e.Version)})
	}
	var items []templateItem
	err := s.db.Table(s.tables.Notifications).Batch(attrPK, attrSK).Get(keys...).Consistent(true).All(ctx, &items)
	if err != nil && !errors.Is(err, dynamo.ErrNotFound) {
		return nil, "", wrapErr(op, err)
	}
	sort.Slice(items, func(i, j int) bool { return order[items[i].PK] < order[items[j].PK] })
	for _, it := range items {
		t, err := it.template()
		if err != nil {
			return nil, "", wrapErr(op, err)
		}
		out = append(out, *t)
	}
	return out, next, nil
}
