// Package cfn reads a synthesized CloudFormation template and resolves its intrinsic functions
// (Ref, Fn::GetAtt, Fn::Join, Fn::Sub, Fn::Select, Fn::Split, Fn::If, and the pseudo parameters)
// to concrete values, so the stack's wiring — state machine definitions, policy documents,
// environment variables — can be used on this machine. Each resource's Ref and attributes come
// from Attrs, which FakeAttrs makes up in the shape AWS gives them (ARNs, queue URLs).
package cfn

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Template is a CloudFormation template.
type Template struct {
	Parameters map[string]Parameter `json:"Parameters,omitempty"`
	Conditions map[string]any       `json:"Conditions,omitempty"`
	Resources  map[string]Resource  `json:"Resources"`
	Outputs    map[string]any       `json:"Outputs,omitempty"`
}

// Parameter is a template parameter (CDK adds BootstrapVersion).
type Parameter struct {
	Type    string `json:"Type"`
	Default any    `json:"Default,omitempty"`
}

// Resource is one resource of a template.
type Resource struct {
	Type       string         `json:"Type"`
	Properties map[string]any `json:"Properties,omitempty"`
	Condition  string         `json:"Condition,omitempty"`
	DependsOn  any            `json:"DependsOn,omitempty"`
}

// Parse reads a template.
func Parse(b []byte) (*Template, error) {
	var t Template
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, fmt.Errorf("template: %w", err)
	}
	if len(t.Resources) == 0 {
		return nil, fmt.Errorf("template: no Resources")
	}
	return &t, nil
}

// LogicalIDs returns the ids of the resources of a type ("" for all), sorted.
func (t *Template) LogicalIDs(typ string) []string {
	var out []string
	for id, r := range t.Resources {
		if typ == "" || r.Type == typ {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// Attrs is what a resource resolves to: its Ref value and its Fn::GetAtt attributes.
type Attrs struct {
	Ref   string
	Attrs map[string]string
}

// Resolver resolves intrinsic functions against known resources, parameters and the pseudo
// parameters.
type Resolver struct {
	Partition, Region, AccountID, StackName, StackID, URLSuffix string
	Resources                                                   map[string]Attrs
	Parameters                                                  map[string]string
	// Conditions are the template's conditions, already evaluated (Fn::If).
	Conditions map[string]bool
}

// noValue is AWS::NoValue: the property that resolves to it is removed.
type noValue struct{}

// Resolve returns v with every intrinsic function replaced by its value. Objects and arrays are
// copied; an unknown intrinsic, resource, attribute or parameter is an error naming it.
func (r *Resolver) Resolve(v any) (any, error) {
	out, err := r.resolve(v)
	if err != nil {
		return nil, err
	}
	if _, ok := out.(noValue); ok {
		return nil, nil
	}
	return out, nil
}

// ResolveString resolves v, which must come out a string.
func (r *Resolver) ResolveString(v any) (string, error) {
	out, err := r.Resolve(v)
	if err != nil {
		return "", err
	}
	s, ok := out.(string)
	if !ok {
		return "", fmt.Errorf("resolved to %T, not a string", out)
	}
	return s, nil
}

// ResolveJSON resolves v and encodes the result.
func (r *Resolver) ResolveJSON(v any) (json.RawMessage, error) {
	out, err := r.Resolve(v)
	if err != nil {
		return nil, err
	}
	return json.Marshal(out)
}

func (r *Resolver) resolve(v any) (any, error) {
	switch c := v.(type) {
	case map[string]any:
		if len(c) == 1 {
			for k, arg := range c {
				if k == "Ref" || strings.HasPrefix(k, "Fn::") {
					return r.intrinsic(k, arg)
				}
			}
		}
		out := make(map[string]any, len(c))
		for k, w := range c {
			rv, err := r.resolve(w)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			if _, drop := rv.(noValue); drop {
				continue
			}
			out[k] = rv
		}
		return out, nil
	case []any:
		out := make([]any, 0, len(c))
		for i, w := range c {
			rv, err := r.resolve(w)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			if _, drop := rv.(noValue); drop {
				continue
			}
			out = append(out, rv)
		}
		return out, nil
	}
	return v, nil
}

func (r *Resolver) intrinsic(name string, arg any) (any, error) {
	switch name {
	case "Ref":
		s, ok := arg.(string)
		if !ok {
			return nil, fmt.Errorf("Ref: argument %v is not a string", arg)
		}
		return r.ref(s)
	case "Fn::GetAtt":
		var id, attr string
		switch a := arg.(type) {
		case string:
			id, attr, _ = strings.Cut(a, ".")
		case []any:
			if len(a) != 2 {
				return nil, fmt.Errorf("Fn::GetAtt: needs [logicalId, attribute]")
			}
			rv, err := r.resolve(a[1])
			if err != nil {
				return nil, err
			}
			id, _ = a[0].(string)
			attr, _ = rv.(string)
		}
		return r.getAtt(id, attr)
	case "Fn::Join":
		a, ok := arg.([]any)
		if !ok || len(a) != 2 {
			return nil, fmt.Errorf("Fn::Join: needs [delimiter, [values]]")
		}
		delim, ok := a[0].(string)
		if !ok {
			return nil, fmt.Errorf("Fn::Join: the delimiter is not a string")
		}
		rv, err := r.resolve(a[1])
		if err != nil {
			return nil, fmt.Errorf("Fn::Join: %w", err)
		}
		items, ok := rv.([]any)
		if !ok {
			return nil, fmt.Errorf("Fn::Join: the values are not a list")
		}
		parts := make([]string, len(items))
		for i, it := range items {
			if parts[i], err = scalar(it); err != nil {
				return nil, fmt.Errorf("Fn::Join: value %d: %w", i, err)
			}
		}
		return strings.Join(parts, delim), nil
	case "Fn::Sub":
		return r.sub(arg)
	case "Fn::Select":
		a, ok := arg.([]any)
		if !ok || len(a) != 2 {
			return nil, fmt.Errorf("Fn::Select: needs [index, list]")
		}
		ri, err := r.resolve(a[0])
		if err != nil {
			return nil, err
		}
		idx, err := index(ri)
		if err != nil {
			return nil, fmt.Errorf("Fn::Select: %w", err)
		}
		rl, err := r.resolve(a[1])
		if err != nil {
			return nil, fmt.Errorf("Fn::Select: %w", err)
		}
		list, ok := rl.([]any)
		if !ok || idx >= len(list) {
			return nil, fmt.Errorf("Fn::Select: index %d out of %v", idx, rl)
		}
		return list[idx], nil
	case "Fn::Split":
		a, ok := arg.([]any)
		if !ok || len(a) != 2 {
			return nil, fmt.Errorf("Fn::Split: needs [delimiter, string]")
		}
		delim, _ := a[0].(string)
		rs, err := r.resolve(a[1])
		if err != nil {
			return nil, fmt.Errorf("Fn::Split: %w", err)
		}
		s, ok := rs.(string)
		if !ok || delim == "" {
			return nil, fmt.Errorf("Fn::Split: needs a delimiter and a string")
		}
		var out []any
		for _, p := range strings.Split(s, delim) {
			out = append(out, p)
		}
		return out, nil
	case "Fn::If":
		a, ok := arg.([]any)
		if !ok || len(a) != 3 {
			return nil, fmt.Errorf("Fn::If: needs [condition, then, else]")
		}
		cond, _ := a[0].(string)
		val, known := r.Conditions[cond]
		if !known {
			return nil, fmt.Errorf("Fn::If: condition %q is not known", cond)
		}
		if val {
			return r.resolve(a[1])
		}
		return r.resolve(a[2])
	}
	return nil, fmt.Errorf("intrinsic function %s is not supported", name)
}

func index(v any) (int, error) {
	switch n := v.(type) {
	case float64:
		return int(n), nil
	case json.Number:
		i, err := n.Int64()
		return int(i), err
	case string:
		return strconv.Atoi(n)
	}
	return 0, fmt.Errorf("index %v is not a number", v)
}

func scalar(v any) (string, error) {
	switch s := v.(type) {
	case string:
		return s, nil
	case float64:
		return strconv.FormatFloat(s, 'f', -1, 64), nil
	case json.Number:
		return s.String(), nil
	case bool:
		return strconv.FormatBool(s), nil
	}
	return "", fmt.Errorf("%T is not a string", v)
}

func (r *Resolver) ref(name string) (any, error) {
	switch name {
	case "AWS::Region":
		return r.Region, nil
	case "AWS::AccountId":
		return r.AccountID, nil
	case "AWS::Partition":
		return r.partition(), nil
	case "AWS::StackName":
		return r.StackName, nil
	case "AWS::StackId":
		return r.StackID, nil
	case "AWS::URLSuffix":
		if r.URLSuffix == "" {
			return "amazonaws.com", nil
		}
		return r.URLSuffix, nil
	case "AWS::NoValue":
		return noValue{}, nil
	}
	if v, ok := r.Parameters[name]; ok {
		return v, nil
	}
	a, ok := r.Resources[name]
	if !ok {
		return nil, fmt.Errorf("Ref: %q is not a known resource or parameter", name)
	}
	if a.Ref == "" {
		return nil, fmt.Errorf("Ref: resource %q has no Ref value", name)
	}
	return a.Ref, nil
}

func (r *Resolver) partition() string {
	if r.Partition == "" {
		return "aws"
	}
	return r.Partition
}

func (r *Resolver) getAtt(id, attr string) (any, error) {
	a, ok := r.Resources[id]
	if !ok {
		return nil, fmt.Errorf("Fn::GetAtt: %q is not a known resource", id)
	}
	v, ok := a.Attrs[attr]
	if !ok {
		return nil, fmt.Errorf("Fn::GetAtt: resource %q has no attribute %q", id, attr)
	}
	return v, nil
}

func (r *Resolver) sub(arg any) (any, error) {
	var tmpl string
	vars := map[string]any{}
	switch a := arg.(type) {
	case string:
		tmpl = a
	case []any:
		if len(a) != 2 {
			return nil, fmt.Errorf("Fn::Sub: needs a string or [string, {variables}]")
		}
		tmpl, _ = a[0].(string)
		m, ok := a[1].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("Fn::Sub: the variables are not an object")
		}
		for k, v := range m {
			rv, err := r.resolve(v)
			if err != nil {
				return nil, fmt.Errorf("Fn::Sub: variable %s: %w", k, err)
			}
			vars[k] = rv
		}
	default:
		return nil, fmt.Errorf("Fn::Sub: needs a string or [string, {variables}]")
	}
	var b strings.Builder
	for {
		i := strings.Index(tmpl, "${")
		if i < 0 {
			b.WriteString(tmpl)
			break
		}
		b.WriteString(tmpl[:i])
		end := strings.IndexByte(tmpl[i:], '}')
		if end < 0 {
			return nil, fmt.Errorf("Fn::Sub: unclosed ${ in %q", tmpl)
		}
		name := tmpl[i+2 : i+end]
		tmpl = tmpl[i+end+1:]
		if lit, ok := strings.CutPrefix(name, "!"); ok {
			b.WriteString("${" + lit + "}")
			continue
		}
		var v any
		var err error
		if w, ok := vars[name]; ok {
			v = w
		} else if id, attr, dotted := strings.Cut(name, "."); dotted && !strings.HasPrefix(name, "AWS::") {
			v, err = r.getAtt(id, attr)
		} else {
			v, err = r.ref(name)
		}
		if err != nil {
			return nil, fmt.Errorf("Fn::Sub: %w", err)
		}
		s, err := scalar(v)
		if err != nil {
			return nil, fmt.Errorf("Fn::Sub: ${%s}: %w", name, err)
		}
		b.WriteString(s)
	}
	return b.String(), nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
