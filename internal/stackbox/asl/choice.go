package asl

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// rule is a Choice rule: a comparison of Variable with a value (or the value at a path), or
// And/Or/Not of nested rules. Next is set on top-level rules only.
type rule struct {
	variable  *path
	op        string // StringEquals, NumericLessThan, IsPresent… (without the Path suffix)
	value     any
	valuePath *path
	and, or   []*rule
	not       *rule
	next      string
}

// comparisons are the Choice operators and the JSON type of their value (for the literal form;
// each also has a …Path form comparing with the value at a path), or "" for the Is… tests,
// which take a boolean and have no Path form.
var comparisons = map[string]string{
	"StringEquals": "string", "StringLessThan": "string", "StringGreaterThan": "string",
	"StringLessThanEquals": "string", "StringGreaterThanEquals": "string", "StringMatches": "string",
	"NumericEquals": "number", "NumericLessThan": "number", "NumericGreaterThan": "number",
	"NumericLessThanEquals": "number", "NumericGreaterThanEquals": "number",
	"BooleanEquals":   "boolean",
	"TimestampEquals": "timestamp", "TimestampLessThan": "timestamp", "TimestampGreaterThan": "timestamp",
	"TimestampLessThanEquals": "timestamp", "TimestampGreaterThanEquals": "timestamp",
	"IsNull": "", "IsPresent": "", "IsNumeric": "", "IsString": "", "IsBoolean": "", "IsTimestamp": "",
}

func parseRule(raw json.RawMessage, where string, top bool) (*rule, error) {
	var f map[string]json.RawMessage
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, fmt.Errorf("%s: a choice rule must be an object: %v", where, err)
	}
	r := &rule{}
	seen := map[string]bool{}
	if top {
		if err := unmarshalField(f, "Next", &r.next, where); err != nil {
			return nil, err
		}
		if r.next == "" {
			return nil, fmt.Errorf("%s: a choice rule needs Next", where)
		}
		seen["Next"] = true
	}
	seen["Comment"] = true
	var ops []string
	for k, v := range f {
		switch k {
		case "Next", "Comment":
			continue
		case "Variable":
			var s string
			if err := json.Unmarshal(v, &s); err != nil {
				return nil, fmt.Errorf("%s.Variable: %v", where, err)
			}
			p, err := parseReferencePath(s, true)
			if err != nil {
				return nil, fmt.Errorf("%s.Variable: %w", where, err)
			}
			r.variable = p
		case "And", "Or":
			var list []json.RawMessage
			if err := json.Unmarshal(v, &list); err != nil || len(list) == 0 {
				return nil, fmt.Errorf("%s.%s: must be a non-empty array of rules", where, k)
			}
			for i, item := range list {
				sub, err := parseRule(item, fmt.Sprintf("%s.%s[%d]", where, k, i), false)
				if err != nil {
					return nil, err
				}
				if k == "And" {
					r.and = append(r.and, sub)
				} else {
					r.or = append(r.or, sub)
				}
			}
			ops = append(ops, k)
		case "Not":
			sub, err := parseRule(v, where+".Not", false)
			if err != nil {
				return nil, err
			}
			r.not = sub
			ops = append(ops, k)
		default:
			base, isPath := strings.CutSuffix(k, "Path")
			kind, known := comparisons[base]
			if !known || (isPath && kind == "") {
				base, isPath = k, false
				if kind, known = comparisons[k]; !known {
					return nil, fmt.Errorf("%s: choice operator or field %q is not supported", where, k)
				}
			}
			r.op = base
			ops = append(ops, k)
			if isPath {
				var s string
				if err := json.Unmarshal(v, &s); err != nil {
					return nil, fmt.Errorf("%s.%s: %v", where, k, err)
				}
				p, err := parseReferencePath(s, true)
				if err != nil {
					return nil, fmt.Errorf("%s.%s: %w", where, k, err)
				}
				r.valuePath = p
				continue
			}
			val, err := decode(v)
			if err != nil {
				return nil, fmt.Errorf("%s.%s: %v", where, k, err)
			}
			if err := checkKind(val, kind); err != nil {
				return nil, fmt.Errorf("%s.%s: %w", where, k, err)
			}
			r.value = val
		}
	}
	switch {
	case len(ops) != 1:
		sort.Strings(ops)
		return nil, fmt.Errorf("%s: a choice rule needs exactly one operator, has %v", where, ops)
	case r.op != "" && r.variable == nil:
		return nil, fmt.Errorf("%s: %s needs Variable", where, ops[0])
	case r.op == "" && r.variable != nil:
		return nil, fmt.Errorf("%s: Variable with %s", where, ops[0])
	}
	return r, nil
}

func checkKind(v any, kind string) error {
	ok := true
	switch kind {
	case "string":
		_, ok = v.(string)
	case "number":
		_, ok = number(v)
	case "boolean", "":
		_, ok = v.(bool)
	case "timestamp":
		s, isStr := v.(string)
		_, ok = parseTimestamp(s)
		ok = ok && isStr
	}
	if !ok {
		if kind == "" {
			kind = "boolean"
		}
		return fmt.Errorf("value %s is not a %s", mustEncode(v), kind)
	}
	return nil
}

func parseTimestamp(s string) (time.Time, bool) {
	t, err := time.Parse(time.RFC3339Nano, s)
	return t, err == nil
}

// eval reports whether the rule matches. A Variable that is not in the input fails the
// execution (States.Runtime), except under IsPresent.
func (r *rule) eval(in, ctx any) (bool, error) {
	switch {
	case r.and != nil:
		for _, s := range r.and {
			if ok, err := s.eval(in, ctx); err != nil || !ok {
				return false, err
			}
		}
		return true, nil
	case r.or != nil:
		for _, s := range r.or {
			if ok, err := s.eval(in, ctx); err != nil || ok {
				return ok, err
			}
		}
		return false, nil
	case r.not != nil:
		ok, err := r.not.eval(in, ctx)
		return !ok && err == nil, err
	}
	v, present := r.variable.get(in, ctx)
	if r.op == "IsPresent" {
		return present == r.value.(bool), nil
	}
	if !present {
		return false, runtimeErrorf("Invalid path '%s': The choice state's condition path references an invalid value.", r.variable)
	}
	want := r.value
	if r.valuePath != nil {
		w, ok := r.valuePath.get(in, ctx)
		if !ok {
			return false, runtimeErrorf("Invalid path '%s': The choice state's condition path references an invalid value.", r.valuePath)
		}
		want = w
	}
	switch r.op {
	case "IsNull":
		return (v == nil) == want.(bool), nil
	case "IsNumeric":
		_, ok := number(v)
		return ok == want.(bool), nil
	case "IsString":
		_, ok := v.(string)
		return ok == want.(bool), nil
	case "IsBoolean":
		_, ok := v.(bool)
		return ok == want.(bool), nil
	case "IsTimestamp":
		s, ok := v.(string)
		if ok {
			_, ok = parseTimestamp(s)
		}
		return ok == want.(bool), nil
	case "BooleanEquals":
		a, ok1 := v.(bool)
		b, ok2 := want.(bool)
		return ok1 && ok2 && a == b, nil
	case "StringMatches":
		a, ok1 := v.(string)
		b, ok2 := want.(string)
		return ok1 && ok2 && wildcardMatch(b, a), nil
	}
	kind := comparisons[r.op]
	var c int
	switch kind {
	case "string":
		a, ok1 := v.(string)
		b, ok2 := want.(string)
		if !ok1 || !ok2 {
			return false, nil
		}
		c = strings.Compare(a, b)
	case "number":
		a, ok1 := number(v)
		b, ok2 := number(want)
		if !ok1 || !ok2 {
			return false, nil
		}
		c = cmpFloat(a, b)
	case "timestamp":
		as, ok1 := v.(string)
		bs, ok2 := want.(string)
		if !ok1 || !ok2 {
			return false, nil
		}
		a, ok1 := parseTimestamp(as)
		b, ok2 := parseTimestamp(bs)
		if !ok1 || !ok2 {
			return false, nil
		}
		c = a.Compare(b)
	}
	rel := r.op
	for _, p := range []string{"String", "Numeric", "Timestamp"} {
		rel = strings.TrimPrefix(rel, p)
	}
	switch rel {
	case "Equals":
		return c == 0, nil
	case "LessThan":
		return c < 0, nil
	case "GreaterThan":
		return c > 0, nil
	case "LessThanEquals":
		return c <= 0, nil
	case "GreaterThanEquals":
		return c >= 0, nil
	}
	return false, fmt.Errorf("choice operator %s: unhandled", r.op)
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// wildcardMatch is StringMatches: * matches any run of characters, \* a literal star and \\ a
// backslash.
func wildcardMatch(pattern, s string) bool {
	type tok struct {
		lit  string
		star bool
	}
	var toks []tok
	var lit strings.Builder
	for i := 0; i < len(pattern); i++ {
		c := pattern[i]
		switch {
		case c == '\\' && i+1 < len(pattern):
			i++
			lit.WriteByte(pattern[i])
		case c == '*':
			toks = append(toks, tok{lit: lit.String()}, tok{star: true})
			lit.Reset()
		default:
			lit.WriteByte(c)
		}
	}
	toks = append(toks, tok{lit: lit.String()})
	toks = slices.DeleteFunc(toks, func(t tok) bool { return !t.star && t.lit == "" })
	return matchToks(toks, s, func(t tok) (string, bool) { return t.lit, t.star })
}

func matchToks[T any](toks []T, s string, get func(T) (string, bool)) bool {
	if len(toks) == 0 {
		return s == ""
	}
	lit, star := get(toks[0])
	if !star {
		rest, ok := strings.CutPrefix(s, lit)
		return ok && matchToks(toks[1:], rest, get)
	}
	for i := 0; i <= len(s); i++ {
		if matchToks(toks[1:], s[i:], get) {
			return true
		}
	}
	return false
}
