package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"herald/internal/notify"
)

// codeRequestTimeout answers a request whose body did not arrive within the server's read
// timeout: 408.
const codeRequestTimeout = "request_timeout"

// decode reads the request body as exactly one JSON value into v, strictly, and is the one
// decoder of every route: a body over the limit, invalid UTF-8 (encoding/json would silently
// replace it), a duplicate object key (encoding/json would silently keep the last), unknown
// fields, wrong types and trailing data are errors, each naming the exact field path —
// "recipients[0].user_id", not encoding/json's "recipients.user_id".
func (s *server) decode(w http.ResponseWriter, r *http.Request, v any) error {
	// A body of a known length is read into room for it, not grown to it a doubling at a time;
	// up to presizeLimit only, so a client that announces a large body and sends it slowly does
	// not get that memory held for it before its bytes arrive.
	var buf bytes.Buffer
	if r.ContentLength > 0 {
		buf.Grow(int(min(r.ContentLength, s.maxBody, presizeLimit)) + 1)
	}
	if _, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, s.maxBody)); err != nil {
		return readError(err, s.maxBody)
	}
	return decodeJSON(buf.Bytes(), v)
}

// presizeLimit bounds the room decode makes for a body before reading it.
const presizeLimit = 1 << 20

// decodeSendAt is decode for a request with a send_at; decode already names the field of a
// malformed time, so it is decode.
func (s *server) decodeSendAt(w http.ResponseWriter, r *http.Request, v any) error {
	return s.decode(w, r, v)
}

// readError translates a failure to read the body.
func readError(err error, limit int64) error {
	var (
		tooBig *http.MaxBytesError
		ne     net.Error
	)
	switch {
	case errors.As(err, &tooBig):
		return &notify.Error{Code: notify.ETOOLARGE, Message: fmt.Sprintf("request body is larger than %d bytes", limit)}
	case errors.As(err, &ne) && ne.Timeout():
		return &notify.Error{Code: codeRequestTimeout, Err: err, Message: "the request body did not arrive in time"}
	}
	return notify.Wrap(notify.EINVALID, err, "the request body could not be read")
}

// decodeJSON decodes raw, one JSON value, into v as decode describes.
func decodeJSON(raw []byte, v any) error {
	if len(bytes.TrimSpace(raw)) == 0 {
		return notify.Errorf(notify.EINVALID, "request body is empty; send a JSON object")
	}
	if !utf8.Valid(raw) {
		at := invalidUTF8At(raw)
		if field := jsonPathAt(raw, at); field != "" {
			return notify.FieldError(field, "not valid UTF-8 (at byte offset %d of the body)", at)
		}
		return notify.Errorf(notify.EINVALID, "request body is not valid UTF-8 (at byte offset %d)", at)
	}
	path, keys, dup := scanKeys(raw)
	if dup {
		return notify.FieldError(path, "the key %q appears twice in the same object", lastKey(path))
	}
	// A send request, the one large body the API takes, decodes its recipients into room for them.
	if req, ok := v.(*notify.SendRequest); ok && req.Recipients == nil {
		req.Recipients = notify.RecipientsRoom(raw)
	}
	// A send request's recipients are read flat when they can be (notify.ReadSendRequestFlat:
	// the same result, one object with nothing after it); anything it does not read, encoding/json
	// does, and names what is wrong.
	if req, ok := v.(*notify.SendRequest); !ok || !notify.ReadSendRequestFlat(raw, req) {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(v); err != nil {
			return decodeError(err, raw, reflect.TypeOf(v))
		}
		if _, err := dec.Token(); err != io.EOF {
			return notify.Errorf(notify.EINVALID, "unexpected data after the JSON object (at byte offset %d)", dec.InputOffset())
		}
	}
	if !mayBeInexact(keys, reflect.TypeOf(v)) {
		return nil
	}
	if path, want, ok := inexactKey(raw, reflect.TypeOf(v), ""); ok {
		return notify.FieldError(path, "unknown field %q (keys are case-sensitive: %q)", lastKey(path), want)
	}
	return nil
}

// inexactKey finds an object key that names a field only by encoding/json's case-insensitive
// match ("Title" for "title"): accepting it would let {"channels": …, "Channels": …} silently
// keep one of the two. It returns the key's path and the field's name.
func inexactKey(raw []byte, t reflect.Type, path string) (string, string, bool) {
	t = deref(t)
	if t == nil || implementsUnmarshaler(t) {
		return "", "", false
	}
	switch t.Kind() {
	case reflect.Struct:
		members, ok := objectMembers(raw)
		if !ok {
			return "", "", false
		}
		fields := jsonFields(t)
		for _, m := range members {
			exact := false
			for _, f := range fields {
				if f.name == m.key {
					exact = true
					if p, want, ok := inexactKey(m.raw, f.typ, joinPath(path, m.key)); ok {
						return p, want, true
					}
					break
				}
			}
			if !exact {
				for _, f := range fields {
					if strings.EqualFold(f.name, m.key) {
						return joinPath(path, m.key), f.name, true
					}
				}
			}
		}
	case reflect.Map:
		members, ok := objectMembers(raw)
		if !ok {
			return "", "", false
		}
		for _, m := range members {
			if p, want, ok := inexactKey(m.raw, t.Elem(), joinPath(path, m.key)); ok {
				return p, want, true
			}
		}
	case reflect.Slice, reflect.Array:
		elems, ok := arrayElements(raw)
		if !ok {
			return "", "", false
		}
		for i, e := range elems {
			if p, want, ok := inexactKey(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); ok {
				return p, want, true
			}
		}
	}
	return "", "", false
}

// invalidUTF8At is the offset of the first byte of raw that is not valid UTF-8.
func invalidUTF8At(raw []byte) int {
	for i := 0; i < len(raw); {
		r, n := utf8.DecodeRune(raw[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(raw)
}

// lastKey is the last object key of a field path.
func lastKey(path string) string {
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		return path[i+1:]
	}
	return path
}

// joinPath appends an object key to a field path.
func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// duplicateKey scans raw, one JSON value, for an object with the same key twice and returns
// the path of the second. A syntax error ends the scan without a finding: decoding reports it.
// (encoding/json/v2 refuses duplicates itself, but in Go 1.26 it needs GOEXPERIMENT=jsonv2.)
func duplicateKey(raw []byte) (string, bool) {
	path, _, ok := scanKeys(raw)
	return path, ok
}

// keyFrame is an object or array scanKeys is inside. Paths are built only for a finding, from
// the frames' parents: a 10,000-recipient request has 10,000 objects, and formatting a path for
// each was most of the scan.
type keyFrame struct {
	object  bool
	keys    []string // this object's keys so far (objects here have few)
	parent  *keyFrame
	pkey    string // the key this value has in its parent object
	pidx    int    // or its index in its parent array
	key     string // object: the key whose value comes next
	n       int    // array: the index of the next element
	wantKey bool
}

func (f *keyFrame) path() string {
	if f.parent == nil {
		return ""
	}
	if f.parent.object {
		return joinPath(f.parent.path(), f.pkey)
	}
	return fmt.Sprintf("%s[%d]", f.parent.path(), f.pidx)
}

// scanKeys scans raw for an object with the same key twice (the path of the second, found)
// and returns every distinct object key it met. A syntax error ends the scan without a finding:
// decoding reports it. It reads the bytes itself — encoding/json's Decoder.Token, which it
// used before, allocated for every token and took as long as decoding the request.
func scanKeys(raw []byte) (dup string, keys map[string]struct{}, found bool) {
	keys = map[string]struct{}{}
	var top *keyFrame
	// after marks the end of a value in top: a ',' or top's close must come next.
	after := false
	value := func() {
		after = true
		if top == nil {
			return
		}
		if top.object {
			top.wantKey = true
		} else {
			top.n++
		}
	}
	for i := 0; ; {
		i = skipSpace(raw, i)
		if i >= len(raw) || (top == nil && after) {
			return "", keys, false
		}
		c := raw[i]
		switch {
		case c == ',' && after && top != nil:
			after = false
			i++
			continue
		case (c == '}' && top != nil && top.object && (after || len(top.keys) == 0) && top.wantKey) ||
			(c == ']' && top != nil && !top.object && (after || top.n == 0)):
			top = top.parent
			i++
			value()
			continue
		case after:
			return "", keys, false
		}
		if top != nil && top.object && top.wantKey {
			k, next, ok := jsonString(raw, i)
			if !ok {
				return "", keys, false
			}
			if slices.Contains(top.keys, k) {
				return joinPath(top.path(), k), keys, true
			}
			top.keys = append(top.keys, k)
			keys[k] = struct{}{}
			top.key, top.wantKey = k, false
			if i = skipSpace(raw, next); i >= len(raw) || raw[i] != ':' {
				return "", keys, false
			}
			i++
			continue
		}
		switch c {
		case '{', '[':
			f := &keyFrame{object: c == '{', parent: top, wantKey: c == '{'}
			if top != nil {
				f.pkey, f.pidx = top.key, top.n
			}
			top = f
			i++
		case '"':
			end := stringEnd(raw, i)
			if end < 0 {
				return "", keys, false
			}
			i = end
			value()
		default: // a number, true, false or null: decoding checks which
			start := i
			for i < len(raw) && !strings.ContainsRune(" \t\n\r,]}:[{\"", rune(raw[i])) {
				i++
			}
			if i == start {
				return "", keys, false
			}
			value()
		}
	}
}

// skipSpace is the index of the first byte at or after i that is not JSON whitespace.
func skipSpace(raw []byte, i int) int {
	for i < len(raw) && (raw[i] == ' ' || raw[i] == '\t' || raw[i] == '\n' || raw[i] == '\r') {
		i++
	}
	return i
}

// stringEnd is the index just after the JSON string that starts at raw[i] ('"'), or -1.
func stringEnd(raw []byte, i int) int {
	for j := i + 1; j < len(raw); j++ {
		switch raw[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

// jsonString reads the JSON string that starts at raw[i] ('"'): its value, and the index just
// after it.
func jsonString(raw []byte, i int) (string, int, bool) {
	if i >= len(raw) || raw[i] != '"' {
		return "", 0, false
	}
	end := stringEnd(raw, i)
	if end < 0 {
		return "", 0, false
	}
	body := raw[i+1 : end-1]
	if bytes.IndexByte(body, '\\') < 0 {
		return string(body), end, true
	}
	var s string
	if err := json.Unmarshal(raw[i:end], &s); err != nil {
		return "", 0, false
	}
	return s, end, true
}

// mayBeInexact reports whether a key of keys could name a field of t's tree only by
// encoding/json's case-insensitive match — one that folds to a field's name without being it —
// so that the inexactKey walk is needed at all. Non-ASCII keys always may.
func mayBeInexact(keys map[string]struct{}, t reflect.Type) bool {
	names := foldedNames(t)
	for k := range keys {
		for i := 0; i < len(k); i++ {
			if k[i] >= utf8.RuneSelf {
				return true
			}
		}
		if exact, ok := names[strings.ToLower(k)]; ok && !slices.Contains(exact, k) {
			return true
		}
	}
	return false
}

var foldedCache sync.Map // reflect.Type → map[string][]string

// foldedNames maps the lower-case form of every JSON field name in t's tree to the names.
func foldedNames(t reflect.Type) map[string][]string {
	if v, ok := foldedCache.Load(t); ok {
		return v.(map[string][]string)
	}
	names := map[string][]string{}
	seen := map[reflect.Type]bool{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		t = deref(t)
		if t == nil || seen[t] {
			return
		}
		seen[t] = true
		switch t.Kind() {
		case reflect.Struct:
			for _, f := range jsonFields(t) {
				l := strings.ToLower(f.name)
				if !slices.Contains(names[l], f.name) {
					names[l] = append(names[l], f.name)
				}
				walk(f.typ)
			}
		case reflect.Map, reflect.Slice, reflect.Array:
			walk(t.Elem())
		}
	}
	walk(t)
	foldedCache.Store(t, names)
	return names
}

// decodeError translates an encoding/json error on raw, decoded into a value of type t, into a
// caller-facing *notify.Error naming the exact field.
func decodeError(err error, raw []byte, t reflect.Type) error {
	var syntax *json.SyntaxError
	switch {
	case errors.Is(err, io.EOF):
		return notify.Errorf(notify.EINVALID, "request body is empty; send a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return notify.Errorf(notify.EINVALID, "malformed JSON: the body ends in the middle of a value")
	case errors.As(err, &syntax):
		return notify.Errorf(notify.EINVALID, "malformed JSON at byte offset %d: %s", syntax.Offset, syntax.Error())
	}
	f, ok := locate(raw, t, "")
	if !ok {
		// Nothing smaller fails alone: only the whole fails (not expected; keep encoding/json's word).
		return notify.Errorf(notify.EINVALID, "malformed JSON: %s", err.Error())
	}
	if f.unknown {
		return notify.FieldError(f.path, "unknown field %q", lastKey(f.path))
	}
	// A type that reads itself (notify.QuietHours) names its own problem, relative to itself.
	var ne *notify.Error
	if errors.As(f.err, &ne) && ne.Code == notify.EINVALID {
		path := f.path
		if ne.Field != "" && path != "" {
			path += "." + ne.Field
		} else if ne.Field != "" {
			path = ne.Field
		}
		return notify.FieldError(path, "%s", ne.Message)
	}
	want := jsonKind(f.typ)
	if deref(f.typ) == reflect.TypeFor[time.Time]() {
		want += " (e.g. 2026-05-01T10:00:00+09:00)"
	}
	got := jsonValueKind(f.raw)
	if f.path == "" {
		return notify.Errorf(notify.EINVALID, "the body must be %s, not %s", want, got)
	}
	return notify.FieldError(f.path, "must be %s, not %s", want, got)
}

// failure is the innermost value of a request that does not decode on its own.
type failure struct {
	path    string
	typ     reflect.Type
	raw     []byte
	err     error
	unknown bool // an object key with no field
}

// locate finds the innermost value of raw that fails to decode into its Go type, walking
// objects and arrays in document order (so it finds what encoding/json reported first), and
// returns its path with array indices ("recipients[0].user_id"). ok is false when raw decodes
// into t.
func locate(raw []byte, t reflect.Type, path string) (failure, bool) {
	err := strictUnmarshal(raw, t)
	if err == nil {
		return failure{}, false
	}
	here := failure{path: path, typ: t, raw: raw, err: err}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if implementsUnmarshaler(t) {
		return here, true
	}
	switch t.Kind() {
	case reflect.Struct:
		members, ok := objectMembers(raw)
		if !ok {
			return here, true
		}
		fields := jsonFields(t)
		for _, m := range members {
			ft, found := fieldFor(fields, m.key)
			if !found {
				return failure{path: joinPath(path, m.key), unknown: true}, true
			}
			if f, ok := locate(m.raw, ft, joinPath(path, m.key)); ok {
				return f, true
			}
		}
	case reflect.Map:
		members, ok := objectMembers(raw)
		if !ok {
			return here, true
		}
		for _, m := range members {
			if f, ok := locate(m.raw, t.Elem(), joinPath(path, m.key)); ok {
				return f, true
			}
		}
	case reflect.Slice, reflect.Array:
		elems, ok := arrayElements(raw)
		if !ok {
			return here, true
		}
		for i, e := range elems {
			if f, ok := locate(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); ok {
				return f, true
			}
		}
	}
	return here, true
}

func deref(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

func strictUnmarshal(raw []byte, t reflect.Type) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec.Decode(reflect.New(t).Interface())
}

func implementsUnmarshaler(t reflect.Type) bool {
	u := reflect.TypeFor[json.Unmarshaler]()
	tu := reflect.TypeFor[interface{ UnmarshalText([]byte) error }]()
	return t.Implements(u) || reflect.PointerTo(t).Implements(u) ||
		(t.Kind() != reflect.String && (t.Implements(tu) || reflect.PointerTo(t).Implements(tu)))
}

type jsonField struct {
	name string
	typ  reflect.Type
}

// jsonFields lists the fields encoding/json decodes into a struct of type t, by JSON name.
func jsonFields(t reflect.Type) []jsonField {
	var out []jsonField
	for _, f := range reflect.VisibleFields(t) {
		if !f.IsExported() || (f.Anonymous && f.Type.Kind() == reflect.Struct && f.Tag.Get("json") == "") {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, jsonField{name: name, typ: f.Type})
	}
	return out
}

// fieldFor matches a key to a field as encoding/json does: exactly, else case-insensitively.
func fieldFor(fields []jsonField, key string) (reflect.Type, bool) {
	for _, f := range fields {
		if f.name == key {
			return f.typ, true
		}
	}
	for _, f := range fields {
		if strings.EqualFold(f.name, key) {
			return f.typ, true
		}
	}
	return nil, false
}

type member struct {
	key string
	raw []byte
}

// objectMembers splits a JSON object into its members; ok is false if raw is not an object.
func objectMembers(raw []byte) ([]member, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	var out []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, false
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
		out = append(out, member{key: key, raw: v})
	}
	return out, true
}

// arrayElements splits a JSON array into its elements; ok is false if raw is not an array.
func arrayElements(raw []byte) ([][]byte, bool) {
	var a []json.RawMessage
	if json.Unmarshal(raw, &a) != nil {
		return nil, false
	}
	out := make([][]byte, len(a))
	for i := range a {
		out[i] = a[i]
	}
	return out, true
}

// jsonValueKind describes a raw JSON value as encoding/json's errors do: "string", "number 5".
func jsonValueKind(raw []byte) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '"':
		var s string
		if json.Unmarshal(raw, &s) == nil && len(s) <= 40 {
			return "the string " + strconv.Quote(s)
		}
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "the number " + string(raw)
}
