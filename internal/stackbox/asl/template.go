package asl

import (
	"encoding/json"
	"fmt"
	"strings"
)

// template is a payload template (Parameters, ItemSelector, ResultSelector): JSON whose object
// keys ending in ".$" take their value from a path or an intrinsic function, with the suffix
// dropped from the key.
type template struct{ root tnode }

type tnode interface{}

type tobject struct{ fields []tfield }

type tfield struct {
	key string
	val tnode
}

type tarray []tnode

type tliteral struct{ v any }

type texpr struct {
	key string // as written, with ".$"
	e   expr
}

func compileTemplate(raw json.RawMessage, where string) (*template, error) {
	v, err := decode(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	n, err := compileNode(v, where)
	if err != nil {
		return nil, err
	}
	return &template{root: n}, nil
}

func compileNode(v any, where string) (tnode, error) {
	switch c := v.(type) {
	case map[string]any:
		obj := tobject{}
		for _, k := range sortedKeys(c) {
			name, dyn := strings.CutSuffix(k, ".$")
			if !dyn {
				n, err := compileNode(c[k], where+"."+k)
				if err != nil {
					return nil, err
				}
				obj.fields = append(obj.fields, tfield{key: k, val: n})
				continue
			}
			if _, dup := c[name]; dup {
				return nil, fmt.Errorf("%s: both %q and %q", where, name, k)
			}
			s, ok := c[k].(string)
			if !ok {
				return nil, fmt.Errorf("%s.%s: must be a path or an intrinsic function, not a %s", where, k, typeName(c[k]))
			}
			e, err := compileExpr(s)
			if err != nil {
				return nil, fmt.Errorf("%s.%s: %w", where, k, err)
			}
			obj.fields = append(obj.fields, tfield{key: name, val: texpr{key: k, e: e}})
		}
		return obj, nil
	case []any:
		arr := make(tarray, len(c))
		for i, item := range c {
			n, err := compileNode(item, fmt.Sprintf("%s[%d]", where, i))
			if err != nil {
				return nil, err
			}
			arr[i] = n
		}
		return arr, nil
	}
	return tliteral{v}, nil
}

// compileExpr reads the value of a ".$" key (or ErrorPath/CausePath): a path or an intrinsic.
func compileExpr(s string) (expr, error) {
	switch {
	case strings.HasPrefix(s, "$"):
		p, err := parsePath(s)
		if err != nil {
			return nil, err
		}
		return pathExpr{p}, nil
	case strings.HasPrefix(s, "States."):
		return parseIntrinsic(s)
	}
	return nil, fmt.Errorf("%q is neither a path ($…) nor an intrinsic function (States.…)", s)
}

// eval builds the template's value. A path that is not in the input fails with
// States.ParameterPathFailure naming the key, as Step Functions does.
func (t *template) eval(in, ctx any, env *evalEnv) (any, error) {
	return evalNode(t.root, in, ctx, env)
}

func evalNode(n tnode, in, ctx any, env *evalEnv) (any, error) {
	switch c := n.(type) {
	case tobject:
		out := make(map[string]any, len(c.fields))
		for _, f := range c.fields {
			v, err := evalNode(f.val, in, ctx, env)
			if err != nil {
				return nil, err
			}
			out[f.key] = v
		}
		return out, nil
	case tarray:
		out := make([]any, len(c))
		for i, item := range c {
			v, err := evalNode(item, in, ctx, env)
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	case tliteral:
		return c.v, nil
	case texpr:
		v, err := c.e.eval(in, ctx, env)
		if err != nil {
			if e, ok := err.(*Error); ok && e.Name == ErrRuntime {
				return nil, &Error{Name: ErrParameterPathFailure, Cause: fmt.Sprintf("The value for the field '%s' must be a valid JSONPath or a valid intrinsic function call: %s", c.key, e.Cause)}
			}
			return nil, err
		}
		return v, nil
	}
	return nil, fmt.Errorf("template node %T", n)
}
