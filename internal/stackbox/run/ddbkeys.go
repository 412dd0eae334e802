package run

import (
	"encoding/json"
	"strings"
	"sync"

	"herald/internal/stackbox/cfn"
)

// leadingKeysKey is the multivalued condition key DynamoDB sets on item-level requests: the
// partition key values of the items the request reads or writes.
const leadingKeysKey = "dynamodb:LeadingKeys"

// tableKeys names the partition key attribute of a table and of each of its indexes.
type tableKeys struct {
	hash    string
	indexes map[string]string // index name → its partition key attribute
}

// partitionKeysCache holds partitionKeys' answer per template: a box's template does not change.
var partitionKeysCache sync.Map // *cfn.Template → map[string]tableKeys

// partitionKeys reads the partition keys of the template's tables, by table name: the HASH
// element of each AWS::DynamoDB::Table's KeySchema, and of its global secondary indexes'; a
// local secondary index shares the table's. A table whose schema does not resolve is left out.
func partitionKeys(t *cfn.Template, r *cfn.Resolver) map[string]tableKeys {
	if t == nil || r == nil {
		return nil
	}
	if v, ok := partitionKeysCache.Load(t); ok {
		return v.(map[string]tableKeys)
	}
	type keySchema []struct{ AttributeName, KeyType string }
	hashOf := func(ks keySchema) string {
		for _, k := range ks {
			if k.KeyType == "HASH" {
				return k.AttributeName
			}
		}
		return ""
	}
	out := map[string]tableKeys{}
	for _, id := range t.LogicalIDs("AWS::DynamoDB::Table") {
		props := t.Resources[id].Properties
		resolved := map[string]any{}
		for _, k := range []string{"KeySchema", "GlobalSecondaryIndexes", "LocalSecondaryIndexes"} {
			if v, ok := props[k]; ok {
				rv, err := r.Resolve(v)
				if err != nil {
					continue
				}
				resolved[k] = rv
			}
		}
		raw, err := json.Marshal(resolved)
		if err != nil {
			continue
		}
		var shape struct {
			KeySchema                                     keySchema
			GlobalSecondaryIndexes, LocalSecondaryIndexes []struct {
				IndexName string
				KeySchema keySchema
			}
		}
		if json.Unmarshal(raw, &shape) != nil {
			continue
		}
		tk := tableKeys{hash: hashOf(shape.KeySchema), indexes: map[string]string{}}
		for _, g := range shape.GlobalSecondaryIndexes {
			tk.indexes[g.IndexName] = hashOf(g.KeySchema)
		}
		for _, l := range shape.LocalSecondaryIndexes {
			tk.indexes[l.IndexName] = tk.hash
		}
		out[r.Resources[id].Ref] = tk
	}
	partitionKeysCache.Store(t, out)
	return out
}

// attrString is the string form of a DynamoDB JSON attribute value, as DynamoDB puts it in
// dynamodb:LeadingKeys: the text of an S or N value, the base64 text of a B value.
func attrString(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 {
		return "", false
	}
	var v map[string]json.RawMessage
	if json.Unmarshal(raw, &v) != nil {
		return "", false
	}
	for _, typ := range []string{"S", "N", "B"} {
		if x, ok := v[typ]; ok {
			var s string
			if json.Unmarshal(x, &s) != nil {
				return "", false
			}
			return s, true
		}
	}
	return "", false
}

// keyValues collects distinct partition key values in the order first seen.
type keyValues []string

func (k *keyValues) add(item map[string]json.RawMessage, hash string) {
	if hash == "" {
		return
	}
	v, ok := attrString(item[hash])
	if !ok {
		return
	}
	for _, have := range *k {
		if have == v {
			return
		}
	}
	*k = append(*k, v)
}

// multi is the request's multivalued condition keys: dynamodb:LeadingKeys when a partition key
// value was found, nil otherwise.
func (k keyValues) multi() map[string][]string {
	if len(k) == 0 {
		return nil
	}
	return map[string][]string{leadingKeysKey: k}
}

// batchLeadingKeys are the partition key values of one table's items in a BatchWriteItem (its
// puts' items and deletes' keys) or a BatchGetItem (its keys).
func batchLeadingKeys(op string, raw json.RawMessage, hash string) keyValues {
	var vals keyValues
	switch op {
	case "BatchWriteItem":
		var reqs []struct {
			PutRequest    *struct{ Item map[string]json.RawMessage }
			DeleteRequest *struct{ Key map[string]json.RawMessage }
		}
		if json.Unmarshal(raw, &reqs) != nil {
			return nil
		}
		for _, r := range reqs {
			if r.PutRequest != nil {
				vals.add(r.PutRequest.Item, hash)
			}
			if r.DeleteRequest != nil {
				vals.add(r.DeleteRequest.Key, hash)
			}
		}
	case "BatchGetItem":
		var req struct{ Keys []map[string]json.RawMessage }
		if json.Unmarshal(raw, &req) != nil {
			return nil
		}
		for _, k := range req.Keys {
			vals.add(k, hash)
		}
	}
	return vals
}

// queryInput is what a Query says of its partition key.
type queryInput struct {
	KeyConditionExpression    string
	ExpressionAttributeNames  map[string]string
	ExpressionAttributeValues map[string]json.RawMessage
	// KeyConditions is the legacy form: attribute → comparison.
	KeyConditions map[string]struct {
		ComparisonOperator string
		AttributeValueList []json.RawMessage
	}
}

// queryPartitionValue finds the partition key value a Query names: the term
// "<name or #alias> = :value" of its KeyConditionExpression for the partition key attribute
// hash (which a key condition must hold), resolved through ExpressionAttributeNames and
// ExpressionAttributeValues; or, in the legacy KeyConditions, the EQ condition on hash.
func queryPartitionValue(in queryInput, hash string) (string, bool) {
	if hash == "" {
		return "", false
	}
	if in.KeyConditionExpression == "" {
		kc, ok := in.KeyConditions[hash]
		if !ok || kc.ComparisonOperator != "EQ" || len(kc.AttributeValueList) != 1 {
			return "", false
		}
		return attrString(kc.AttributeValueList[0])
	}
	name := func(tok string) string {
		if strings.HasPrefix(tok, "#") {
			return in.ExpressionAttributeNames[tok]
		}
		return tok
	}
	toks := expressionTokens(in.KeyConditionExpression)
	for i := 0; i+2 < len(toks); i++ {
		if toks[i+1] != "=" {
			continue
		}
		left, right := toks[i], toks[i+2]
		if !strings.HasPrefix(right, ":") {
			left, right = right, left
		}
		if strings.HasPrefix(right, ":") && name(left) == hash {
			return attrString(in.ExpressionAttributeValues[right])
		}
	}
	return "", false
}

// expressionTokens splits a DynamoDB key condition expression into names, placeholders,
// keywords, comparison operators, parentheses and commas.
func expressionTokens(expr string) []string {
	var toks []string
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '(' || c == ')' || c == ',' || c == '=':
			toks = append(toks, expr[i:i+1])
			i++
		case c == '<' || c == '>':
			if i+1 < len(expr) && (expr[i+1] == '=' || (c == '<' && expr[i+1] == '>')) {
				toks = append(toks, expr[i:i+2])
				i += 2
			} else {
				toks = append(toks, expr[i:i+1])
				i++
			}
		default:
			j := i
			for j < len(expr) && !strings.ContainsRune(" \t\n\r()=,<>", rune(expr[j])) {
				j++
			}
			toks = append(toks, expr[i:j])
			i = j
		}
	}
	return toks
}
