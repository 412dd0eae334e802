package ddb

import (
	"context"
	"fmt"
	"time"

	"github.com/guregu/dynamo/v2"
)

// The live inbox connections table: one item per open WebSocket connection of the AWS WebSocket
// API, keyed by its connection id (all $disconnect knows), with the user it was opened for and
// a TTL past API Gateway's two-hour connection limit, so a connection whose $disconnect never
// ran disappears on its own. The by_user index finds a user's connections for each inbox event;
// a broadcast scans the table (one post per connection, no write per user).
const (
	attrConnID      = "id"
	attrConnUser    = "user"
	attrConnExpires = "expires"
	indexConnByUser = "by_user"
)

// ConnectionTTL is how long a connection item outlives its $connect: API Gateway closes every
// WebSocket connection after two hours.
const ConnectionTTL = 2*time.Hour + 10*time.Minute

// ConnectionsTable is the design of the connections table named name (see the constants).
func ConnectionsTable(name string) TableSpec {
	s := func(n string) KeyAttribute { return KeyAttribute{Name: n, Type: TypeString} }
	return TableSpec{
		Name:         name,
		PartitionKey: s(attrConnID),
		GlobalIndexes: []IndexSpec{{
			Name: indexConnByUser, PartitionKey: s(attrConnUser), Projection: ProjectKeysOnly,
		}},
		TTLAttribute: attrConnExpires,
	}
}

// CreateConnectionsTable creates the table (tests and tooling; in AWS the CDK app does).
func CreateConnectionsTable(ctx context.Context, db *dynamo.DB, name string) error {
	spec := ConnectionsTable(name)
	if _, err := db.Client().CreateTable(ctx, spec.createInput()); err != nil {
		return fmt.Errorf("ddb: create table %s: %w", name, err)
	}
	if err := db.Table(name).Wait(ctx, dynamo.ActiveStatus); err != nil {
		return fmt.Errorf("ddb: wait for table %s: %w", name, err)
	}
	if err := db.Table(name).UpdateTTL(attrConnExpires, true).Run(ctx); err != nil {
		return fmt.Errorf("ddb: enable TTL on %s: %w", name, err)
	}
	return nil
}

// Connection is one open WebSocket connection of a user.
type Connection struct {
	ID   string
	User string
}

// Connections is the connections table.
type Connections struct {
	t dynamo.Table
}

// NewConnections returns the connections table name of db.
func NewConnections(db *dynamo.DB, name string) *Connections {
	return &Connections{t: db.Table(name)}
}

type connItem struct {
	ID      string `dynamo:"id,hash"`
	User    string `dynamo:"user" index:"by_user,hash"`
	Expires int64  `dynamo:"expires"`
}

// Put records connection c, opened at now.
func (cs *Connections) Put(ctx context.Context, c Connection, now time.Time) error {
	it := connItem{ID: c.ID, User: c.User, Expires: now.Add(ConnectionTTL).Unix()}
	if err := cs.t.Put(it).Run(ctx); err != nil {
		return fmt.Errorf("ddb: put connection: %w", err)
	}
	return nil
}

// Delete forgets connection id; an unknown id is no error.
func (cs *Connections) Delete(ctx context.Context, id string) error {
	if err := cs.t.Delete(attrConnID, id).Run(ctx); err != nil {
		return fmt.Errorf("ddb: delete connection: %w", err)
	}
	return nil
}

// User is the user connection id was opened for; ok is false if it is unknown or expired.
func (cs *Connections) User(ctx context.Context, id string, now time.Time) (user string, ok bool, err error) {
	var it connItem
	err = cs.t.Get(attrConnID, id).Consistent(true).One(ctx, &it)
	if err == dynamo.ErrNotFound {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("ddb: get connection: %w", err)
	}
	return it.User, it.Expires > now.Unix(), nil
}

// ByUser is the ids of user's connections. The index is eventually consistent: a connection
// opened a moment ago may be missing, which its resume message makes good.
func (cs *Connections) ByUser(ctx context.Context, user string) ([]string, error) {
	var items []connItem
	if err := cs.t.Get(attrConnUser, user).Index(indexConnByUser).All(ctx, &items); err != nil {
		return nil, fmt.Errorf("ddb: connections of a user: %w", err)
	}
	ids := make([]string, len(items))
	for i, it := range items {
		ids[i] = it.ID
	}
	return ids, nil
}

// Each calls fn with every unexpired connection, a page at a time (a broadcast's scan).
func (cs *Connections) Each(ctx context.Context, now time.Time, fn func(page []Connection) error) error {
	var next dynamo.PagingKey
	for {
		var items []connItem
		q := cs.t.Scan().Filter("$ > ?", attrConnExpires, now.Unix()).SearchLimit(1000)
		if next != nil {
			q = q.StartFrom(next)
		}
		lek, err := q.AllWithLastEvaluatedKey(ctx, &items)
		if err != nil {
			return fmt.Errorf("ddb: scan connections: %w", err)
		}
		page := make([]Connection, len(items))
		for i, it := range items {
			page[i] = Connection{ID: it.ID, User: it.User}
		}
		if len(page) > 0 {
			if err := fn(page); err != nil {
				return err
			}
		}
		if lek == nil {
			return nil
		}
		next = lek
	}
}
