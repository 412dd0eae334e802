package asl

import (
	"fmt"
	"strconv"
	"strings"
)

// path is a JSONPath expression as Step Functions takes it: "$" (the state's input) or "$$"
// (the context object), followed by .name, ['name'], [index] and — outside reference paths —
// the wildcards .* and [*]. Filters, slices and deep scan (..) are refused at Parse, so a
// definition using them fails loudly rather than being evaluated differently.
type path struct {
	src     string
	context bool // $$
	steps   []step
}

type step struct {
	name     string
	index    int
	isIndex  bool
	wildcard bool
}

func (p *path) String() string { return p.src }

// definite reports whether the path selects at most one value (no wildcard).
func (p *path) definite() bool {
	for _, s := range p.steps {
		if s.wildcard {
			return false
		}
	}
	return true
}

func parsePath(src string) (*path, error) {
	p := &path{src: src}
	rest, ok := strings.CutPrefix(src, "$")
	if !ok {
		return nil, fmt.Errorf("path %q does not start with $", src)
	}
	if r, ok := strings.CutPrefix(rest, "$"); ok {
		p.context, rest = true, r
	}
	for rest != "" {
		switch rest[0] {
		case '.':
			if strings.HasPrefix(rest, "..") {
				return nil, fmt.Errorf("path %q: deep scan (..) is not supported", src)
			}
			rest = rest[1:]
			end := strings.IndexAny(rest, ".[")
			if end < 0 {
				end = len(rest)
			}
			name := rest[:end]
			rest = rest[end:]
			switch {
			case name == "":
				return nil, fmt.Errorf("path %q: empty name after '.'", src)
			case name == "*":
				p.steps = append(p.steps, step{wildcard: true})
			case strings.ContainsAny(name, "]'\"()?@,: "):
				return nil, fmt.Errorf("path %q: name %q has a character Step Functions' paths do not allow here", src, name)
			default:
				p.steps = append(p.steps, step{name: name})
			}
		case '[':
			end := closingBracket(rest)
			if end < 0 {
				return nil, fmt.Errorf("path %q: unclosed '['", src)
			}
			inner := strings.TrimSpace(rest[1:end])
			rest = rest[end+1:]
			switch {
			case inner == "*":
				p.steps = append(p.steps, step{wildcard: true})
			case len(inner) >= 2 && (inner[0] == '\'' || inner[0] == '"') && inner[len(inner)-1] == inner[0]:
				p.steps = append(p.steps, step{name: inner[1 : len(inner)-1]})
			default:
				i, err := strconv.Atoi(inner)
				if err != nil || i < 0 {
					return nil, fmt.Errorf("path %q: [%s] is not supported (only [n], [*] and ['name'])", src, inner)
				}
				p.steps = append(p.steps, step{index: i, isIndex: true})
			}
		default:
			return nil, fmt.Errorf("path %q: unexpected %q", src, rest[:1])
		}
	}
	return p, nil
}

func closingBracket(s string) int {
	var quote byte
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == ']':
			return i
		}
	}
	return -1
}

// parseReferencePath parses a path that must name one place (ResultPath, a Choice Variable,
// SecondsPath…): no wildcards, and no context object where the caller says so.
func parseReferencePath(src string, allowContext bool) (*path, error) {
	p, err := parsePath(src)
	if err != nil {
		return nil, err
	}
	if !p.definite() {
		return nil, fmt.Errorf("path %q: a reference path cannot have wildcards", src)
	}
	if p.context && !allowContext {
		return nil, fmt.Errorf("path %q: the context object ($$) is not allowed here", src)
	}
	return p, nil
}

// get evaluates the path on input or, for $$, on ctx. A definite path returns the one value it
// names, or false when it is missing; a wildcard path returns the array of every match.
func (p *path) get(input, ctx any) (any, bool) {
	root := input
	if p.context {
		root = ctx
	}
	if p.definite() {
		v := root
		for _, s := range p.steps {
			var ok bool
			if v, ok = s.apply(v); !ok {
				return nil, false
			}
		}
		return v, true
	}
	cur := []any{root}
	for _, s := range p.steps {
		var next []any
		for _, v := range cur {
			if s.wildcard {
				switch c := v.(type) {
				case []any:
					next = append(next, c...)
				case map[string]any:
					for _, k := range sortedKeys(c) {
						next = append(next, c[k])
					}
				}
				continue
			}
			if w, ok := s.apply(v); ok {
				next = append(next, w)
			}
		}
		cur = next
	}
	if cur == nil {
		cur = []any{}
	}
	return cur, true
}

func (s step) apply(v any) (any, bool) {
	if s.isIndex {
		a, ok := v.([]any)
		if !ok || s.index >= len(a) {
			return nil, false
		}
		return a[s.index], true
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, false
	}
	w, ok := m[s.name]
	return w, ok
}

// set returns a copy of root with value placed at the path (ResultPath): objects along the
// path are copied, missing ones created. An existing non-object on the way, or an index step,
// cannot take the value.
func (p *path) set(root, value any) (any, error) {
	if len(p.steps) == 0 {
		return value, nil
	}
	return setSteps(root, p.steps, value, p.src)
}

func setSteps(v any, steps []step, value any, src string) (any, error) {
	s := steps[0]
	if s.isIndex || s.wildcard {
		return nil, fmt.Errorf("ResultPath %q: cannot set through an array index", src)
	}
	var m map[string]any
	switch c := v.(type) {
	case map[string]any:
		m = make(map[string]any, len(c)+1)
		for k, w := range c {
			m[k] = w
		}
	case nil:
		m = map[string]any{}
	default:
		return nil, fmt.Errorf("ResultPath %q: %q is in a %s, not an object", src, s.name, typeName(v))
	}
	if len(steps) == 1 {
		m[s.name] = value
		return m, nil
	}
	child, ok := m[s.name]
	if !ok {
		child = nil
	}
	if ok && child != nil {
		if _, isObj := child.(map[string]any); !isObj {
			return nil, fmt.Errorf("ResultPath %q: %q holds a %s, not an object", src, s.name, typeName(child))
		}
	}
	w, err := setSteps(child, steps[1:], value, src)
	if err != nil {
		return nil, err
	}
	m[s.name] = w
	return m, nil
}
