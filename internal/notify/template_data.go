package notify

import (
	"strings"

	"github.com/cbroglie/mustache"
)

// checkDataUse refuses data that would render as Go's writing of a value rather than as text:
// a variable ({{name}}, {{a.b}}, {{.}}) whose value is an object or a list. Variables take
// strings, numbers and booleans; objects and lists belong in sections ({{#items}}…{{/items}}),
// which it walks with their items as Mustache would, innermost context first. path names the
// template field in the error; the field is template.data.<name>.
func checkDataUse(path, within string, tags []mustache.Tag, chain []any) error {
	for _, tag := range tags {
		name := tag.Name()
		switch tag.Type() {
		case mustache.Variable:
			v, ok := resolveData(chain, name)
			if !ok {
				continue // a missing variable is reported by rendering
			}
			switch v.(type) {
			case map[string]any, []any:
				field := name
				if name == "." && within != "" {
					field = within // {{.}} writes the section's item: name the section
				}
				return FieldError("template.data."+field, "%s writes %q as text, but the data gives an object or a list; a variable takes a string, number or boolean, and objects and lists go in a section ({{#%s}}…{{/%s}})",
					path, name, name, name)
			}
		case mustache.Section:
			v, _ := resolveData(chain, name)
			switch x := v.(type) {
			case []any:
				for _, item := range x {
					if err := checkDataUse(path, name, tag.Tags(), append([]any{item}, chain...)); err != nil {
						return err
					}
				}
			case map[string]any:
				if err := checkDataUse(path, name, tag.Tags(), append([]any{x}, chain...)); err != nil {
					return err
				}
			default:
				if x == nil || x == false || x == "" {
					continue // a falsy section is not rendered
				}
				if err := checkDataUse(path, name, tag.Tags(), append([]any{x}, chain...)); err != nil {
					return err
				}
			}
		case mustache.InvertedSection:
			if err := checkDataUse(path, within, tag.Tags(), chain); err != nil {
				return err
			}
		}
	}
	return nil
}

// resolveData looks name up the way Mustache does: "." is the innermost context; a dotted name's
// first part is looked up from the innermost context outward and the rest within it.
func resolveData(chain []any, name string) (any, bool) {
	if name == "." {
		if len(chain) == 0 {
			return nil, false
		}
		return chain[0], true
	}
	first, rest, dotted := strings.Cut(name, ".")
	var v any
	found := false
	for _, c := range chain {
		if m, ok := c.(map[string]any); ok {
			if v, found = m[first]; found {
				break
			}
		}
	}
	for found && dotted {
		first, rest, dotted = strings.Cut(rest, ".")
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		v, found = m[first]
	}
	return v, found
}
