package asl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

// Values moving between states are decoded JSON: map[string]any, []any, json.Number, string,
// bool or nil. They are never modified in place — ResultPath copies the objects along its path —
// so a value can be shared between the iterations of a Map running at once.

func decode(raw []byte) (any, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return map[string]any{}, nil
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, fmt.Errorf("trailing data after the JSON value")
	}
	return v, nil
}

func encode(v any) (json.RawMessage, error) {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

func mustEncode(v any) string {
	b, err := encode(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	return string(b)
}

// number returns v as a float64 when it is a JSON number.
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	case float64:
		return n, true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	}
	return 0, false
}

// integer returns v as an int64 when it is a JSON number with no fractional part.
func integer(v any) (int64, bool) {
	if n, ok := v.(json.Number); ok {
		if i, err := n.Int64(); err == nil {
			return i, true
		}
	}
	f, ok := number(v)
	if !ok || f != math.Trunc(f) || math.IsInf(f, 0) || f > math.MaxInt64 || f < math.MinInt64 {
		return 0, false
	}
	return int64(f), true
}

func intValue(i int64) json.Number     { return json.Number(strconv.FormatInt(i, 10)) }
func floatValue(f float64) json.Number { return json.Number(strconv.FormatFloat(f, 'f', -1, 64)) }

// typeName names v's JSON type, for error messages.
func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case bool:
		return "boolean"
	case json.Number, float64, int, int64:
		return "number"
	}
	return fmt.Sprintf("%T", v)
}

// equal compares JSON values; numbers by value (1 and 1.0 are equal).
func equal(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !equal(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equal(x[i], y[i]) {
				return false
			}
		}
		return true
	case nil:
		return b == nil
	case string:
		y, ok := b.(string)
		return ok && x == y
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	}
	if f, ok := number(a); ok {
		g, ok := number(b)
		return ok && f == g
	}
	return false
}
