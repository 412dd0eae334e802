package ddb

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/guregu/dynamo/v2"
)

// Tables names the DynamoDB tables a Store uses.
type Tables struct {
	Notifications string // notifications, recipient chunks, idempotency claims, stats shards, chunk markers
	Deliveries    string // one item per delivery
	Users         string // devices, token owners, sealed contacts, preferences
	Suppressions  string // keyed by notify.AddressKey
	Inbox         string // in-app inbox items and broadcast markers
}

// TablesWithPrefix returns the standard table names behind prefix, e.g. "herald-prod-" gives
// "herald-prod-notifications".
func TablesWithPrefix(prefix string) Tables {
	return Tables{
		Notifications: prefix + "notifications",
		Deliveries:    prefix + "deliveries",
		Users:         prefix + "users",
		Suppressions:  prefix + "suppressions",
		Inbox:         prefix + "inbox-items",
	}
}

func (t Tables) validate() error {
	var errs []error
	for _, f := range []struct{ field, name string }{
		{"Notifications", t.Notifications}, {"Deliveries", t.Deliveries}, {"Users", t.Users},
		{"Suppressions", t.Suppressions}, {"Inbox", t.Inbox},
	} {
		if len(f.name) < 3 || len(f.name) > 255 {
			errs = append(errs, fmt.Errorf("table name for %s must be 3 to 255 characters, got %q", f.field, f.name))
		}
	}
	return errors.Join(errs...)
}

// Attribute types of key attributes, as DynamoDB (and CDK's AttributeType) spell them.
const (
	TypeString = "S"
	TypeNumber = "N"
	TypeBinary = "B"
)

// Projection types of secondary indexes.
const (
	ProjectAll      = "ALL"
	ProjectKeysOnly = "KEYS_ONLY"
	ProjectInclude  = "INCLUDE"
)

// KeyAttribute is one key attribute: its name and scalar type (TypeString, TypeNumber, TypeBinary).
type KeyAttribute struct {
	Name string
	Type string
}

// IndexSpec is a secondary index. For a local index PartitionKey is the table's.
type IndexSpec struct {
	Name             string
	PartitionKey     KeyAttribute
	SortKey          *KeyAttribute
	Projection       string   // ProjectAll, ProjectKeysOnly or ProjectInclude
	NonKeyAttributes []string // for ProjectInclude
}

// TableSpec is the design of one table: what CreateTables creates and what infrastructure code
// must declare to match. Every table is PAY_PER_REQUEST.
type TableSpec struct {
	Name          string
	PartitionKey  KeyAttribute
	SortKey       *KeyAttribute
	GlobalIndexes []IndexSpec
	LocalIndexes  []IndexSpec
	TTLAttribute  string // "" for none
}

// Attribute and index names shared by the table specs and the store code.
const (
	attrPK  = "pk"
	attrSK  = "sk"
	attrTTL = "ttl"

	attrRecipientUser = "ruser"
	attrCreatedAt     = "created_at"
	indexByUser       = "by_user"

	attrDeliveryID      = "id"
	attrDeliveryShard   = "nshard"
	indexByNotification = "by_notification"

	attrSuppressionKey = "address_key"

	attrInboxUser   = "user_id"
	attrInboxID     = "id"
	attrInboxOrder  = "sk"
	attrInboxExpiry = "expires_at"
)

// TableSpecs returns the design of every table, named by tables. The package documentation
// explains the items each one holds.
func TableSpecs(tables Tables) []TableSpec {
	s := func(name string) KeyAttribute { return KeyAttribute{Name: name, Type: TypeString} }
	sp := func(name string) *KeyAttribute { k := s(name); return &k }
	return []TableSpec{
		{
			Name:         tables.Notifications,
			PartitionKey: s(attrPK),
			SortKey:      sp(attrSK),
			// The recipient index (sparse: only a main item with ruser, the one user it was sent
			// to, enters it; keys only, so status and counter writes never touch it).
			GlobalIndexes: []IndexSpec{{
				Name:         indexByUser,
				PartitionKey: s(attrRecipientUser),
				SortKey:      &KeyAttribute{Name: attrCreatedAt, Type: TypeNumber},
				Projection:   ProjectKeysOnly,
			}},
			TTLAttribute: attrTTL,
		},
		{
			Name:         tables.Deliveries,
			PartitionKey: s(attrDeliveryID),
			GlobalIndexes: []IndexSpec{{
				Name:         indexByNotification,
				PartitionKey: s(attrDeliveryShard),
				SortKey:      sp(attrDeliveryID),
				Projection:   ProjectKeysOnly,
			}},
			TTLAttribute: attrTTL,
		},
		{
			Name:         tables.Users,
			PartitionKey: s(attrPK),
			SortKey:      sp(attrSK),
		},
		{
			Name:         tables.Suppressions,
			PartitionKey: s(attrSuppressionKey),
		},
		{
			Name:         tables.Inbox,
			PartitionKey: s(attrInboxUser),
			SortKey:      sp(attrInboxOrder),
			TTLAttribute: attrTTL,
		},
	}
}

// CreateTables creates every table of TableSpecs(tables) (on-demand billing), waits until each is
// active, and enables TTL where the spec has a TTL attribute. It is for tests and tooling; in
// AWS the tables come from the CDK app, which mirrors TableSpecs.
func CreateTables(ctx context.Context, db *dynamo.DB, tables Tables) error {
	if err := tables.validate(); err != nil {
		return fmt.Errorf("ddb: create tables: %w", err)
	}
	client := db.Client()
	specs := TableSpecs(tables)
	for _, spec := range specs {
		if _, err := client.CreateTable(ctx, spec.createInput()); err != nil {
			return fmt.Errorf("ddb: create table %s: %w", spec.Name, err)
		}
	}
	for _, spec := range specs {
		if err := db.Table(spec.Name).Wait(ctx, dynamo.ActiveStatus); err != nil {
			return fmt.Errorf("ddb: wait for table %s: %w", spec.Name, err)
		}
		if spec.TTLAttribute != "" {
			if err := db.Table(spec.Name).UpdateTTL(spec.TTLAttribute, true).Run(ctx); err != nil {
				return fmt.Errorf("ddb: enable TTL on %s: %w", spec.Name, err)
			}
		}
	}
	return nil
}

func (spec TableSpec) createInput() *dynamodb.CreateTableInput {
	defs := map[string]string{}
	var order []string
	define := func(k KeyAttribute) {
		if _, ok := defs[k.Name]; !ok {
			order = append(order, k.Name)
		}
		defs[k.Name] = k.Type
	}
	schema := func(pk KeyAttribute, sk *KeyAttribute) []types.KeySchemaElement {
		define(pk)
		out := []types.KeySchemaElement{{AttributeName: aws.String(pk.Name), KeyType: types.KeyTypeHash}}
		if sk != nil {
			define(*sk)
			out = append(out, types.KeySchemaElement{AttributeName: aws.String(sk.Name), KeyType: types.KeyTypeRange})
		}
		return out
	}
	projection := func(ix IndexSpec) *types.Projection {
		p := &types.Projection{ProjectionType: types.ProjectionType(ix.Projection)}
		if ix.Projection == ProjectInclude {
			p.NonKeyAttributes = ix.NonKeyAttributes
		}
		return p
	}
	in := &dynamodb.CreateTableInput{
		TableName:   aws.String(spec.Name),
		BillingMode: types.BillingModePayPerRequest,
		KeySchema:   schema(spec.PartitionKey, spec.SortKey),
	}
	for _, ix := range spec.GlobalIndexes {
		in.GlobalSecondaryIndexes = append(in.GlobalSecondaryIndexes, types.GlobalSecondaryIndex{
			IndexName:  aws.String(ix.Name),
			KeySchema:  schema(ix.PartitionKey, ix.SortKey),
			Projection: projection(ix),
		})
	}
	for _, ix := range spec.LocalIndexes {
		in.LocalSecondaryIndexes = append(in.LocalSecondaryIndexes, types.LocalSecondaryIndex{
			IndexName:  aws.String(ix.Name),
			KeySchema:  schema(ix.PartitionKey, ix.SortKey),
			Projection: projection(ix),
		})
	}
	for _, name := range order {
		in.AttributeDefinitions = append(in.AttributeDefinitions, types.AttributeDefinition{
			AttributeName: aws.String(name), AttributeType: types.ScalarAttributeType(defs[name]),
		})
	}
	return in
}
