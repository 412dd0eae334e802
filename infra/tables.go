package main

import (
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/jsii-runtime-go"

	"herald/internal/ddb"
)

// The tables are data: internal/ddb's TableSpecs, the design its store code uses, plus the
// rate-limit table of internal/ratelimit's DynamoDB limiter. A change to either design changes
// the stack without touching the code below.

// rateLimitTable mirrors ddb.CreateRateLimitTable: one item per provider window, key "key",
// expired by TTL on "expires".
func rateLimitTable(name string) ddb.TableSpec {
	return ddb.TableSpec{
		Name:         name,
		PartitionKey: ddb.KeyAttribute{Name: "key", Type: ddb.TypeString},
		TTLAttribute: "expires",
	}
}

// tableSpecs lists every table of environment prefix ("herald-dev-") by logical name.
func tableSpecs(prefix string) (names []string, specs map[string]ddb.TableSpec) {
	specs = map[string]ddb.TableSpec{}
	for _, spec := range append(ddb.TableSpecs(ddb.TablesWithPrefix(prefix)), rateLimitTable(prefix+"ratelimit"), ddb.ConnectionsTable(prefix+"connections")) {
		logical := strings.TrimPrefix(spec.Name, prefix)
		names = append(names, logical)
		specs[logical] = spec
	}
	return names, specs
}

func attribute(k ddb.KeyAttribute) *awsdynamodb.Attribute {
	t := map[string]awsdynamodb.AttributeType{
		ddb.TypeString: awsdynamodb.AttributeType_STRING, ddb.TypeNumber: awsdynamodb.AttributeType_NUMBER, ddb.TypeBinary: awsdynamodb.AttributeType_BINARY,
	}[k.Type]
	return &awsdynamodb.Attribute{Name: jsii.String(k.Name), Type: t}
}

func optAttribute(k *ddb.KeyAttribute) *awsdynamodb.Attribute {
	if k == nil {
		return nil
	}
	return attribute(*k)
}

func projection(p string) awsdynamodb.ProjectionType {
	switch p {
	case ddb.ProjectKeysOnly:
		return awsdynamodb.ProjectionType_KEYS_ONLY
	case ddb.ProjectInclude:
		return awsdynamodb.ProjectionType_INCLUDE
	}
	return awsdynamodb.ProjectionType_ALL
}

func (h *herald) addTables() {
	names, specs := tableSpecs(h.name(""))
	for _, logical := range names {
		spec := specs[logical]
		props := &awsdynamodb.TableProps{
			TableName:    jsii.String(spec.Name),
			PartitionKey: attribute(spec.PartitionKey),
			SortKey:      optAttribute(spec.SortKey),
			BillingMode:  awsdynamodb.BillingMode_PAY_PER_REQUEST,
			Encryption:   awsdynamodb.TableEncryption_AWS_MANAGED,
			PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
				PointInTimeRecoveryEnabled: jsii.Bool(true),
			},
			DeletionProtection: jsii.Bool(h.settings.ProtectData),
			RemovalPolicy:      h.removal(),
		}
		if spec.TTLAttribute != "" {
			props.TimeToLiveAttribute = jsii.String(spec.TTLAttribute)
		}
		t := awsdynamodb.NewTable(h.stack, jsii.String(pascal(logical)+"Table"), props)
		for _, ix := range spec.GlobalIndexes {
			p := &awsdynamodb.GlobalSecondaryIndexProps{
				IndexName:      jsii.String(ix.Name),
				PartitionKey:   attribute(ix.PartitionKey),
				SortKey:        optAttribute(ix.SortKey),
				ProjectionType: projection(ix.Projection),
			}
			if len(ix.NonKeyAttributes) > 0 {
				p.NonKeyAttributes = jsii.Strings(ix.NonKeyAttributes...)
			}
			t.AddGlobalSecondaryIndex(p)
		}
		for _, ix := range spec.LocalIndexes {
			p := &awsdynamodb.LocalSecondaryIndexProps{
				IndexName:      jsii.String(ix.Name),
				SortKey:        attribute(*ix.SortKey),
				ProjectionType: projection(ix.Projection),
			}
			if len(ix.NonKeyAttributes) > 0 {
				p.NonKeyAttributes = jsii.Strings(ix.NonKeyAttributes...)
			}
			t.AddLocalSecondaryIndex(p)
		}
		h.tables[logical] = t
		h.tableOrder = append(h.tableOrder, logical)
	}
}
