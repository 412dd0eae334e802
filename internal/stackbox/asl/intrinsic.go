package asl

import (
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"
)

// expr is a value computed from the state's input and context: a path, an intrinsic function
// call or a literal argument of one.
type expr interface {
	eval(in, ctx any, env *evalEnv) (any, error)
}

// evalEnv is what an evaluation may need beyond the input: randomness for States.MathRandom and
// States.UUID, injectable so tests are repeatable.
type evalEnv struct {
	rand func() float64
}

type literal struct {
	v   any
	raw string // a quoted string as written, escapes of { and } kept
}

func (l literal) eval(_, _ any, _ *evalEnv) (any, error) { return l.v, nil }

type pathExpr struct{ p *path }

func (e pathExpr) eval(in, ctx any, _ *evalEnv) (any, error) {
	v, ok := e.p.get(in, ctx)
	if !ok {
		return nil, runtimeErrorf("the JSONPath %s could not be found in the input %s", e.p, mustEncode(pick(e.p, in, ctx)))
	}
	return v, nil
}

func pick(p *path, in, ctx any) any {
	if p.context {
		return ctx
	}
	return in
}

type call struct {
	name string
	args []expr
	fn   intrinsicFunc
}

type intrinsicFunc struct {
	minArgs, maxArgs int // maxArgs -1: any number
	fn               func(args []any, env *evalEnv) (any, error)
}

func (c *call) eval(in, ctx any, env *evalEnv) (any, error) {
	args := make([]any, len(c.args))
	for i, a := range c.args {
		v, err := a.eval(in, ctx, env)
		if err != nil {
			return nil, err
		}
		args[i] = v
	}
	v, err := c.fn.fn(args, env)
	if err != nil {
		return nil, &Error{Name: ErrIntrinsicFailure, Cause: fmt.Sprintf("%s: %v", c.name, err)}
	}
	return v, nil
}

// intrinsics are the intrinsic functions Step Functions defines that this interpreter runs.
// Parse refuses a name not here.
var intrinsics = map[string]intrinsicFunc{
	"States.Format":         {1, -1, fnFormat},
	"States.StringToJson":   {1, 1, fnStringToJSON},
	"States.JsonToString":   {1, 1, fnJSONToString},
	"States.Array":          {0, -1, func(a []any, _ *evalEnv) (any, error) { return slices.Clone(a), nil }},
	"States.ArrayPartition": {2, 2, fnArrayPartition},
	"States.ArrayContains":  {2, 2, fnArrayContains},
	"States.ArrayRange":     {3, 3, fnArrayRange},
	"States.ArrayGetItem":   {2, 2, fnArrayGetItem},
	"States.ArrayLength":    {1, 1, fnArrayLength},
	"States.ArrayUnique":    {1, 1, fnArrayUnique},
	"States.Base64Encode":   {1, 1, fnBase64Encode},
	"States.Base64Decode":   {1, 1, fnBase64Decode},
	"States.Hash":           {2, 2, fnHash},
	"States.JsonMerge":      {3, 3, fnJSONMerge},
	"States.MathRandom":     {2, 3, fnMathRandom},
	"States.MathAdd":        {2, 2, fnMathAdd},
	"States.StringSplit":    {2, 2, fnStringSplit},
	"States.UUID":           {0, 0, fnUUID},
}

// parseIntrinsic parses "States.Name(arg, …)" where an argument is a 'string' (\' \{ \} \\
// escaped), a number, true, false, null, a path or another intrinsic call.
func parseIntrinsic(src string) (*call, error) {
	p := &intrinsicParser{src: src}
	c, err := p.call()
	if err != nil {
		return nil, fmt.Errorf("intrinsic %q: %w", src, err)
	}
	p.space()
	if p.pos != len(src) {
		return nil, fmt.Errorf("intrinsic %q: unexpected %q after the call", src, src[p.pos:])
	}
	return c, nil
}

type intrinsicParser struct {
	src string
	pos int
}

func (p *intrinsicParser) space() {
	for p.pos < len(p.src) && (p.src[p.pos] == ' ' || p.src[p.pos] == '\t') {
		p.pos++
	}
}

func (p *intrinsicParser) call() (*call, error) {
	open := strings.IndexByte(p.src[p.pos:], '(')
	if open < 0 {
		return nil, fmt.Errorf("no '(' after the function name")
	}
	name := strings.TrimSpace(p.src[p.pos : p.pos+open])
	fn, ok := intrinsics[name]
	if !ok {
		return nil, fmt.Errorf("intrinsic function %s is not supported", name)
	}
	p.pos += open + 1
	c := &call{name: name, fn: fn}
	p.space()
	if p.pos < len(p.src) && p.src[p.pos] == ')' {
		p.pos++
	} else {
		for {
			a, err := p.arg()
			if err != nil {
				return nil, err
			}
			if l, ok := a.(literal); ok && name == "States.Format" && len(c.args) == 0 {
				a = literal{v: l.raw}
			}
			c.args = append(c.args, a)
			p.space()
			if p.pos >= len(p.src) {
				return nil, fmt.Errorf("unclosed '(' of %s", name)
			}
			if p.src[p.pos] == ')' {
				p.pos++
				break
			}
			if p.src[p.pos] != ',' {
				return nil, fmt.Errorf("expected ',' or ')' at %q", p.src[p.pos:])
			}
			p.pos++
		}
	}
	if len(c.args) < fn.minArgs || (fn.maxArgs >= 0 && len(c.args) > fn.maxArgs) {
		return nil, fmt.Errorf("%s takes %s arguments, not %d", name, arity(fn), len(c.args))
	}
	return c, nil
}

func arity(f intrinsicFunc) string {
	switch {
	case f.maxArgs < 0:
		return fmt.Sprintf("at least %d", f.minArgs)
	case f.minArgs == f.maxArgs:
		return strconv.Itoa(f.minArgs)
	}
	return fmt.Sprintf("%d to %d", f.minArgs, f.maxArgs)
}

func (p *intrinsicParser) arg() (expr, error) {
	p.space()
	if p.pos >= len(p.src) {
		return nil, fmt.Errorf("missing argument")
	}
	rest := p.src[p.pos:]
	switch {
	case rest[0] == '\'':
		// b is the string's value; raw keeps \{ and \} escaped for States.Format's template,
		// where they stand for literal braces rather than a {} placeholder.
		var b, raw strings.Builder
		for i := 1; i < len(rest); i++ {
			c := rest[i]
			if c == '\\' && i+1 < len(rest) {
				i++
				switch rest[i] {
				case '\'', '\\':
				case '{', '}':
					raw.WriteByte('\\')
				default:
					b.WriteByte('\\')
					raw.WriteByte('\\')
				}
				b.WriteByte(rest[i])
				raw.WriteByte(rest[i])
				continue
			}
			if c == '\'' {
				p.pos += i + 1
				return literal{v: b.String(), raw: raw.String()}, nil
			}
			b.WriteByte(c)
			raw.WriteByte(c)
		}
		return nil, fmt.Errorf("unclosed string %s", rest)
	case rest[0] == '$':
		end := argEnd(rest)
		src := strings.TrimSpace(rest[:end])
		pth, err := parsePath(src)
		if err != nil {
			return nil, err
		}
		p.pos += end
		return pathExpr{pth}, nil
	case strings.HasPrefix(rest, "States."):
		return p.call()
	}
	end := argEnd(rest)
	tok := strings.TrimSpace(rest[:end])
	p.pos += end
	switch tok {
	case "true":
		return literal{v: true}, nil
	case "false":
		return literal{v: false}, nil
	case "null":
		return literal{v: nil}, nil
	}
	if _, err := strconv.ParseFloat(tok, 64); err == nil {
		return literal{v: json.Number(tok)}, nil
	}
	return nil, fmt.Errorf("argument %q is not a string, number, boolean, null, path or intrinsic", tok)
}

// argEnd is where an unquoted argument ends: the ',' or ')' outside brackets and quotes.
func argEnd(s string) int {
	depth := 0
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '[':
			depth++
		case c == ']':
			depth--
		case depth == 0 && (c == ',' || c == ')'):
			return i
		}
	}
	return len(s)
}

func fnFormat(a []any, _ *evalEnv) (any, error) {
	tmpl, ok := a[0].(string)
	if !ok {
		return nil, fmt.Errorf("the template is a %s, not a string", typeName(a[0]))
	}
	var b strings.Builder
	next := 1
	for i := 0; i < len(tmpl); i++ {
		c := tmpl[i]
		if c == '\\' && i+1 < len(tmpl) && (tmpl[i+1] == '{' || tmpl[i+1] == '}') {
			b.WriteByte(tmpl[i+1])
			i++
			continue
		}
		if c == '{' && i+1 < len(tmpl) && tmpl[i+1] == '}' {
			if next >= len(a) {
				return nil, fmt.Errorf("more {} in the template than arguments")
			}
			switch v := a[next].(type) {
			case string:
				b.WriteString(v)
			case map[string]any, []any:
				return nil, fmt.Errorf("argument %d is a %s: only strings, numbers, booleans and null can be formatted", next, typeName(v))
			default:
				b.WriteString(mustEncode(v))
			}
			next++
			i++
			continue
		}
		b.WriteByte(c)
	}
	if next != len(a) {
		return nil, fmt.Errorf("%d arguments for %d {} in the template", len(a)-1, next-1)
	}
	return b.String(), nil
}

func fnStringToJSON(a []any, _ *evalEnv) (any, error) {
	s, ok := a[0].(string)
	if !ok {
		return nil, fmt.Errorf("the argument is a %s, not a string", typeName(a[0]))
	}
	v, err := decode([]byte(s))
	if err != nil {
		return nil, fmt.Errorf("not JSON: %v", err)
	}
	return v, nil
}

func fnJSONToString(a []any, _ *evalEnv) (any, error) {
	b, err := encode(a[0])
	if err != nil {
		return nil, err
	}
	return string(b), nil
}

func array(v any, what string) ([]any, error) {
	a, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%s is a %s, not an array", what, typeName(v))
	}
	return a, nil
}

func intArg(v any, what string) (int64, error) {
	i, ok := integer(v)
	if !ok {
		return 0, fmt.Errorf("%s is not an integer: %s", what, mustEncode(v))
	}
	return i, nil
}

func fnArrayPartition(a []any, _ *evalEnv) (any, error) {
	arr, err := array(a[0], "the first argument")
	if err != nil {
		return nil, err
	}
	n, err := intArg(a[1], "the chunk size")
	if err != nil || n <= 0 {
		return nil, fmt.Errorf("the chunk size must be a positive integer")
	}
	out := []any{}
	for i := 0; i < len(arr); i += int(n) {
		out = append(out, slices.Clone(arr[i:min(len(arr), i+int(n))]))
	}
	return out, nil
}

func fnArrayContains(a []any, _ *evalEnv) (any, error) {
	arr, err := array(a[0], "the first argument")
	if err != nil {
		return nil, err
	}
	return slices.ContainsFunc(arr, func(v any) bool { return equal(v, a[1]) }), nil
}

func fnArrayRange(a []any, _ *evalEnv) (any, error) {
	var n [3]int64
	for i := range n {
		v, err := intArg(a[i], fmt.Sprintf("argument %d", i+1))
		if err != nil {
			return nil, err
		}
		n[i] = v
	}
	if n[2] == 0 {
		return nil, fmt.Errorf("the step is 0")
	}
	out := []any{}
	for v := n[0]; (n[2] > 0 && v <= n[1]) || (n[2] < 0 && v >= n[1]); v += n[2] {
		if len(out) == 1000 {
			return nil, fmt.Errorf("more than 1000 items")
		}
		out = append(out, intValue(v))
	}
	return out, nil
}

func fnArrayGetItem(a []any, _ *evalEnv) (any, error) {
	arr, err := array(a[0], "the first argument")
	if err != nil {
		return nil, err
	}
	i, err := intArg(a[1], "the index")
	if err != nil {
		return nil, err
	}
	if i < 0 || i >= int64(len(arr)) {
		return nil, fmt.Errorf("index %d out of range of %d items", i, len(arr))
	}
	return arr[i], nil
}

func fnArrayLength(a []any, _ *evalEnv) (any, error) {
	arr, err := array(a[0], "the argument")
	if err != nil {
		return nil, err
	}
	return intValue(int64(len(arr))), nil
}

func fnArrayUnique(a []any, _ *evalEnv) (any, error) {
	arr, err := array(a[0], "the argument")
	if err != nil {
		return nil, err
	}
	out := []any{}
	for _, v := range arr {
		if !slices.ContainsFunc(out, func(w any) bool { return equal(v, w) }) {
			out = append(out, v)
		}
	}
	return out, nil
}

func fnBase64Encode(a []any, _ *evalEnv) (any, error) {
	s, ok := a[0].(string)
	if !ok {
		return nil, fmt.Errorf("the argument is a %s, not a string", typeName(a[0]))
	}
	return base64.StdEncoding.EncodeToString([]byte(s)), nil
}

func fnBase64Decode(a []any, _ *evalEnv) (any, error) {
	s, ok := a[0].(string)
	if !ok {
		return nil, fmt.Errorf("the argument is a %s, not a string", typeName(a[0]))
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, err
	}
	return string(b), nil
}

func fnHash(a []any, _ *evalEnv) (any, error) {
	algo, ok := a[1].(string)
	if !ok {
		return nil, fmt.Errorf("the algorithm is a %s, not a string", typeName(a[1]))
	}
	var h hash.Hash
	switch algo {
	case "MD5":
		h = md5.New()
	case "SHA-1":
		h = sha1.New()
	case "SHA-256":
		h = sha256.New()
	case "SHA-384":
		h = sha512.New384()
	case "SHA-512":
		h = sha512.New()
	default:
		return nil, fmt.Errorf("unknown algorithm %q (MD5, SHA-1, SHA-256, SHA-384, SHA-512)", algo)
	}
	s, ok := a[0].(string)
	if !ok {
		b, err := encode(a[0])
		if err != nil {
			return nil, err
		}
		s = string(b)
	}
	h.Write([]byte(s))
	return hex.EncodeToString(h.Sum(nil)), nil
}

func fnJSONMerge(a []any, _ *evalEnv) (any, error) {
	x, ok1 := a[0].(map[string]any)
	y, ok2 := a[1].(map[string]any)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("both arguments must be objects, not %s and %s", typeName(a[0]), typeName(a[1]))
	}
	if deep, ok := a[2].(bool); !ok || deep {
		// Step Functions supports only the shallow merge.
		return nil, fmt.Errorf("the third argument must be false (only the shallow merge is supported)")
	}
	out := maps.Clone(x)
	maps.Copy(out, y)
	return out, nil
}

func fnMathRandom(a []any, env *evalEnv) (any, error) {
	lo, err := intArg(a[0], "the start")
	if err != nil {
		return nil, err
	}
	hi, err := intArg(a[1], "the end")
	if err != nil {
		return nil, err
	}
	if hi <= lo {
		return nil, fmt.Errorf("the end %d is not above the start %d", hi, lo)
	}
	r := env.rand
	if r == nil {
		r = rand.Float64
	}
	return intValue(lo + int64(r()*float64(hi-lo))), nil
}

func fnMathAdd(a []any, _ *evalEnv) (any, error) {
	x, err := intArg(a[0], "the first argument")
	if err != nil {
		return nil, err
	}
	y, err := intArg(a[1], "the second argument")
	if err != nil {
		return nil, err
	}
	return intValue(x + y), nil
}

func fnStringSplit(a []any, _ *evalEnv) (any, error) {
	s, ok1 := a[0].(string)
	sep, ok2 := a[1].(string)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("both arguments must be strings")
	}
	out := []any{}
	// Like Step Functions: every character of the separator splits, and empty parts are dropped.
	for _, part := range strings.FieldsFunc(s, func(r rune) bool { return strings.ContainsRune(sep, r) }) {
		out = append(out, part)
	}
	return out, nil
}

func fnUUID(_ []any, env *evalEnv) (any, error) {
	if env.rand == nil {
		return uuid.NewString(), nil
	}
	var b [16]byte
	for i := range b {
		b[i] = byte(env.rand() * 256)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	u, err := uuid.FromBytes(b[:])
	if err != nil {
		return nil, err
	}
	return u.String(), nil
}
