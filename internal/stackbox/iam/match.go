package iam

import (
	"fmt"
	"strings"
)

// pattern is a policy string with its policy variables substituted. The characters a variable
// produced, and the escapes ${*}, ${?} and ${$}, are literal: never wildcards.
type pattern struct {
	text string
	// literal[i] reports that text[i] is never a wildcard; nil when no character is.
	literal []bool
	// none is set when a variable had neither a value nor a default: the pattern matches
	// nothing.
	none bool
}

func (p pattern) wildcard(i int) bool {
	c := p.text[i]
	return (c == '*' || c == '?') && (p.literal == nil || !p.literal[i])
}

// slice is the part of p from byte i to byte j.
func (p pattern) slice(i, j int) pattern {
	q := pattern{text: p.text[i:j]}
	if p.literal != nil {
		q.literal = p.literal[i:j]
	}
	return q
}

// policyVariablesVersion is the policy language version that has policy variables: in a
// policy of another (or no) Version, ${…} is literal text ("IAM policy elements: Variables
// and tags").
const policyVariablesVersion = "2012-10-17"

// expand substitutes the policy variables of s from the request context, as AWS does in the
// Resource element and in the values of string and ARN conditions ("IAM policy elements:
// Variables and tags"): ${key} is the value of a single-valued context key (a multivalued key
// cannot be a variable), ${key, 'default'} falls back to the default when the key has no value,
// and ${*}, ${?} and ${$} are those characters, literally. A variable with neither a value nor
// a default leaves no value to compare with: the pattern matches nothing, so a Resource or
// NotResource entry matches no resource and a condition value no request value (a negated
// operator then holds, since nothing is equal to or like it).
func expand(s string, ctx *reqContext) pattern {
	if !strings.Contains(s, "${") {
		return pattern{text: s}
	}
	var b strings.Builder
	var lit []bool
	add := func(str string, literal bool) {
		b.WriteString(str)
		for range len(str) {
			lit = append(lit, literal)
		}
	}
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			add(s, false)
			break
		}
		add(s[:i], false)
		v, n, err := parseVariable(s[i:])
		if err != nil {
			// ParsePolicy refuses malformed variables; here the text stays as written.
			add(s[i:], false)
			break
		}
		value, ok := v.resolve(ctx)
		if !ok {
			return pattern{none: true}
		}
		add(value, true)
		s = s[i+n:]
	}
	return pattern{text: b.String(), literal: lit}
}

// policyVariable is one ${…} of a policy.
type policyVariable struct {
	key        string
	def        string
	hasDefault bool
}

// parseVariable reads the variable at the start of s ("${key}" or "${key, 'default'}") and
// returns it with the number of bytes it takes.
func parseVariable(s string) (policyVariable, int, error) {
	if !strings.HasPrefix(s, "${") {
		return policyVariable{}, 0, fmt.Errorf("no variable at %q", s)
	}
	i := 2
	for i < len(s) && s[i] != '}' && s[i] != ',' {
		i++
	}
	if i == len(s) {
		return policyVariable{}, 0, fmt.Errorf("variable %q has no closing brace", s)
	}
	v := policyVariable{key: strings.TrimSpace(s[2:i])}
	if v.key == "" {
		return policyVariable{}, 0, fmt.Errorf("empty variable in %q", s)
	}
	if s[i] == '}' {
		return v, i + 1, nil
	}
	// A default value: a comma, then the value in single quotes.
	i++
	for i < len(s) && s[i] == ' ' {
		i++
	}
	if i == len(s) || s[i] != '\'' {
		return policyVariable{}, 0, fmt.Errorf("variable %q: a default value must be in single quotes", s)
	}
	end := strings.IndexByte(s[i+1:], '\'')
	if end < 0 {
		return policyVariable{}, 0, fmt.Errorf("variable %q: the default value has no closing quote", s)
	}
	v.def, v.hasDefault = s[i+1:i+1+end], true
	i += end + 2
	for i < len(s) && s[i] == ' ' {
		i++
	}
	if i == len(s) || s[i] != '}' {
		return policyVariable{}, 0, fmt.Errorf("variable %q has no closing brace", s)
	}
	return v, i + 1, nil
}

func (v policyVariable) resolve(ctx *reqContext) (string, bool) {
	switch v.key {
	case "*", "?", "$":
		return v.key, true
	}
	if ctx != nil {
		if value, ok := ctx.singleValue(v.key); ok {
			return value, true
		}
	}
	if v.hasDefault {
		return v.def, true
	}
	return "", false
}

// checkVariables reports a malformed variable in s.
func checkVariables(s string) error {
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			return nil
		}
		_, n, err := parseVariable(s[i:])
		if err != nil {
			return err
		}
		s = s[i+n:]
	}
}

// token is one element of a compiled wildcard pattern: a literal character, a star (any run
// of characters) or a question mark (any one character).
type token struct {
	c         byte
	star, one bool
	// colon reports whether the star or question mark may match ':'.
	colon bool
}

// globTokens compiles a pattern whose * and ? match any character, colons included, as in
// StringLike and in the Action element.
func globTokens(p pattern) []token {
	toks := make([]token, len(p.text))
	for i := range len(p.text) {
		switch {
		case p.wildcard(i) && p.text[i] == '*':
			toks[i] = token{star: true, colon: true}
		case p.wildcard(i):
			toks[i] = token{one: true, colon: true}
		default:
			toks[i] = token{c: p.text[i]}
		}
	}
	return toks
}

// resourceTokens compiles a Resource or NotResource entry as AWS matches it against ARNs
// ("IAM JSON policy elements: Resource", Using wildcards in resource ARNs): wildcards apply
// within the colon-separated segments of the ARN (arn:partition:service:region:account:
// resource); a * that is the last character of a segment can expand beyond the colon
// boundaries; in the resource segment, which may itself hold ':' and '/', * and ? match any
// character. An entry that is not an ARN ("*") is matched as a plain wildcard pattern.
func resourceTokens(p pattern) []token {
	if !strings.HasPrefix(p.text, "arn:") {
		return globTokens(p)
	}
	toks := make([]token, len(p.text))
	seg := 0 // the segment of the character: 5 and more is the resource
	for i := range len(p.text) {
		c := p.text[i]
		switch {
		case p.wildcard(i) && c == '*':
			last := i+1 == len(p.text) || p.text[i+1] == ':'
			toks[i] = token{star: true, colon: seg >= 5 || last}
		case p.wildcard(i):
			toks[i] = token{one: true, colon: seg >= 5}
		default:
			if c == ':' && seg < 5 {
				seg++
			}
			toks[i] = token{c: c}
		}
	}
	return toks
}

// matchTokens reports whether the tokens match all of s. Stars that may not cross a colon
// rule out the single-backtrack matcher of globMatch; this is a dynamic program over the
// tokens and the positions of s, small for ARNs.
func matchTokens(toks []token, s string) bool {
	n := len(s)
	// next[j] reports whether toks[i+1:] match s[j:]; cur is being computed for toks[i:].
	next, cur := make([]bool, n+1), make([]bool, n+1)
	next[n] = true
	for i := len(toks) - 1; i >= 0; i-- {
		t := toks[i]
		switch {
		case t.star:
			cur[n] = next[n]
			for j := n - 1; j >= 0; j-- {
				cur[j] = next[j] || ((t.colon || s[j] != ':') && cur[j+1])
			}
		default:
			cur[n] = false
			for j := range n {
				var ok bool
				if t.one {
					ok = t.colon || s[j] != ':'
				} else {
					ok = s[j] == t.c
				}
				cur[j] = ok && next[j+1]
			}
		}
		next, cur = cur, next
	}
	return next[0]
}

// resourceMatches reports whether a resource ARN matches a Resource or NotResource entry.
func resourceMatches(p pattern, resource string) bool {
	if p.none {
		return false
	}
	return matchTokens(resourceTokens(p), resource)
}

// stringLike is StringLike: * any run of characters, ? any one, the rest literal.
func stringLike(p pattern, s string) bool {
	return matchTokens(globTokens(p), s)
}

// arnLike matches an ARN against a pattern segment by segment (partition, service, region,
// account, resource), each with * and ? wildcards, as ArnLike and ArnEquals do ("IAM JSON
// policy elements: Condition operators": each of the six colon-delimited components is checked
// separately). A pattern or value that is not a six-part ARN is compared as a whole.
func arnLike(p pattern, a string) bool {
	bounds := func(s string) []int {
		var b []int
		for i := 0; i < len(s) && len(b) < 5; i++ {
			if s[i] == ':' {
				b = append(b, i)
			}
		}
		return b
	}
	pb, ab := bounds(p.text), bounds(a)
	if len(pb) != 5 || len(ab) != 5 {
		return stringLike(p, a)
	}
	pstart, astart := 0, 0
	for k := 0; k <= 5; k++ {
		pend, aend := len(p.text), len(a)
		if k < 5 {
			pend, aend = pb[k], ab[k]
		}
		if !stringLike(p.slice(pstart, pend), a[astart:aend]) {
			return false
		}
		pstart, astart = pend+1, aend+1
	}
	return true
}

// globMatch matches s against a pattern where * is any run of characters and ? one character.
func globMatch(pattern, s string) bool {
	// Iterative matching with backtracking to the last star: linear enough for ARNs.
	p, i, star, mark := 0, 0, -1, 0
	for i < len(s) {
		switch {
		case p < len(pattern) && (pattern[p] == '?' || pattern[p] == s[i]):
			p++
			i++
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, i
			p++
		case star >= 0:
			p = star + 1
			mark++
			i = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}
