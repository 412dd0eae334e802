package notify

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// Flat JSON: the few documents that carry a large send's recipients between Herald's own stages —
// a stored page of recipients, a send batch's items — are arrays of small objects of strings.
// encoding/json spends most of its time on them in reflection and in a string per value; a
// profile of a 100,000-token send put these documents at 2–3 % of the whole run's CPU. The
// writer here produces exactly encoding/json's bytes, and the reader accepts only what it can
// read exactly as encoding/json would (no escapes, valid UTF-8, known keys), telling its caller
// to use encoding/json for anything else. See docs/design.md ("Flat JSON between stages").

// AppendJSONString appends s as encoding/json writes a string: quoted, with the same escapes
// (HTML-safe, U+2028 and U+2029 escaped, invalid UTF-8 as U+FFFD).
func AppendJSONString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s) // a string always encodes
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// AppendJSONOmitEmpty is AppendJSONKey for a string field tagged omitempty: nothing when value
// is empty.
func AppendJSONOmitEmpty(dst []byte, first *bool, key, value string) []byte {
	if value == "" {
		return dst
	}
	return AppendJSONKey(dst, first, key, value)
}

// AppendJSONKey appends `"key":"value"` to an object being written, with a comma unless first
// is set; it clears first. key must need no escaping.
func AppendJSONKey(dst []byte, first *bool, key, value string) []byte {
	if !*first {
		dst = append(dst, ',')
	}
	*first = false
	dst = append(dst, '"')
	dst = append(dst, key...)
	dst = append(dst, '"', ':')
	return AppendJSONString(dst, value)
}

// AppendRecipients appends rs as json.Marshal writes them.
func AppendRecipients(dst []byte, rs []Recipient) []byte {
	if rs == nil {
		return append(dst, "null"...)
	}
	dst = append(dst, '[')
	for i := range rs {
		if i > 0 {
			dst = append(dst, ',')
		}
		r := &rs[i]
		first := true
		dst = append(dst, '{')
		dst = AppendJSONOmitEmpty(dst, &first, "user_id", r.UserID)
		dst = AppendJSONOmitEmpty(dst, &first, "email", r.Email)
		dst = AppendJSONOmitEmpty(dst, &first, "phone", r.Phone)
		dst = AppendJSONOmitEmpty(dst, &first, "fcm_token", r.FCMToken)
		dst = AppendJSONOmitEmpty(dst, &first, "apns_token", r.APNsToken)
		dst = AppendJSONOmitEmpty(dst, &first, "app", r.App)
		dst = append(dst, '}')
	}
	return append(dst, ']')
}

// DecodeRecipients decodes a JSON array of recipients into rs[:0] (its room reused), as
// json.Unmarshal would, and returns them.
func DecodeRecipients(b []byte, rs []Recipient) ([]Recipient, error) {
	if out, ok := decodeRecipientsFlat(b, rs[:0]); ok {
		if out == nil {
			out = []Recipient{} // an empty array, as encoding/json makes of it
		}
		return out, nil
	}
	out := rs[:0]
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	return out, nil
}

func decodeRecipientsFlat(b []byte, out []Recipient) ([]Recipient, bool) {
	r := NewFlatReader(b)
	out, ok := readRecipients(r, out)
	if !ok || !r.End() {
		return nil, false
	}
	return out, true
}

// readRecipients reads an array of recipients, appending them to out.
func readRecipients(r *FlatReader, out []Recipient) ([]Recipient, bool) {
	ok := r.Array(func() bool {
		out = append(out, Recipient{})
		return readRecipient(r, &out[len(out)-1])
	})
	return out, ok
}

// readRecipient reads one recipient object into rc.
func readRecipient(r *FlatReader, rc *Recipient) bool {
	return r.Object(func(key string) bool {
		var f *string
		switch key {
		case "user_id":
			f = &rc.UserID
		case "email":
			f = &rc.Email
		case "phone":
			f = &rc.Phone
		case "fcm_token":
			f = &rc.FCMToken
		case "apns_token":
			f = &rc.APNsToken
		case "app":
			f = &rc.App
		default:
			return false
		}
		s, ok := r.String()
		*f = s
		return ok
	})
}

// FlatReader reads a JSON document of a known shape in one pass, or says it cannot: a caller
// that gets false from any of its methods decodes the document with encoding/json instead,
// which also reports what is wrong with it. The strings it returns share one copy of the
// document.
type FlatReader struct {
	b []byte
	s string // b as a string, made on the first string read: the strings are its substrings
	i int
}

// NewFlatReader reads b.
func NewFlatReader(b []byte) *FlatReader { return &FlatReader{b: b} }

func (r *FlatReader) ws() {
	for r.i < len(r.b) {
		switch r.b[r.i] {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return
		}
	}
}

// consume skips white space and then c, reporting whether c was there.
func (r *FlatReader) consume(c byte) bool {
	r.ws()
	if r.i < len(r.b) && r.b[r.i] == c {
		r.i++
		return true
	}
	return false
}

// End reports whether nothing but white space is left.
func (r *FlatReader) End() bool {
	r.ws()
	return r.i == len(r.b)
}

// Array reads an array, calling elem for each element; elem reads it.
func (r *FlatReader) Array(elem func() bool) bool {
	if !r.consume('[') {
		return false
	}
	if r.consume(']') {
		return true
	}
	for {
		if !elem() {
			return false
		}
		if r.consume(',') {
			continue
		}
		return r.consume(']')
	}
}

// Object reads an object, calling field with each key; field reads its value. A key with an
// escape in it is not read (encoding/json would match it to a field after unescaping).
func (r *FlatReader) Object(field func(key string) bool) bool {
	if !r.consume('{') {
		return false
	}
	if r.consume('}') {
		return true
	}
	for {
		r.ws()
		key, ok := r.String()
		if !ok || !r.consume(':') {
			return false
		}
		r.ws()
		if !field(key) {
			return false
		}
		if r.consume(',') {
			continue
		}
		return r.consume('}')
	}
}

// String reads a string without escapes, in valid UTF-8.
func (r *FlatReader) String() (string, bool) {
	r.ws()
	if r.i >= len(r.b) || r.b[r.i] != '"' {
		return "", false
	}
	start := r.i + 1
	ascii := true
	for j := start; j < len(r.b); j++ {
		switch c := r.b[j]; {
		case c == '"':
			if !ascii && !utf8.Valid(r.b[start:j]) {
				return "", false // encoding/json would replace the bad bytes with U+FFFD
			}
			if r.s == "" {
				r.s = string(r.b)
			}
			r.i = j + 1
			return r.s[start:j], true
		case c == '\\' || c < 0x20:
			return "", false
		case c >= 0x80:
			ascii = false
		}
	}
	return "", false
}

// Int reads a small non-negative integer written plainly (at most nine digits).
func (r *FlatReader) Int() (int, bool) {
	r.ws()
	j := r.i
	for j < len(r.b) && j-r.i < 10 && r.b[j] >= '0' && r.b[j] <= '9' {
		j++
	}
	if j == r.i || j-r.i > 9 || (r.b[r.i] == '0' && j-r.i > 1) {
		return 0, false
	}
	if j < len(r.b) {
		if c := r.b[j]; c == '.' || c == 'e' || c == 'E' {
			return 0, false
		}
	}
	n := 0
	for _, c := range r.b[r.i:j] {
		n = n*10 + int(c-'0')
	}
	r.i = j
	return n, true
}

// Skip passes over one value of any kind and returns its bytes, which it does not check beyond
// where the value ends: a caller hands them to encoding/json, which does.
func (r *FlatReader) Skip() ([]byte, bool) {
	r.ws()
	start := r.i
	if r.i >= len(r.b) {
		return nil, false
	}
	switch r.b[r.i] {
	case '"', '{', '[': // up to where the nesting it opens closes again
		for depth := 0; ; {
			if r.i >= len(r.b) {
				return nil, false
			}
			switch r.b[r.i] {
			case '"':
				if !r.skipString() {
					return nil, false
				}
			case '{', '[':
				depth++
				r.i++
			case '}', ']':
				depth--
				r.i++
			default:
				r.i++
			}
			if depth == 0 {
				break
			}
		}
	default: // a number or a literal: up to what ends it
		for r.i < len(r.b) && strings.IndexByte(",}] \t\n\r", r.b[r.i]) < 0 {
			r.i++
		}
	}
	return r.b[start:r.i], r.i > start
}

// skipString passes over the string at r.i, escapes and all.
func (r *FlatReader) skipString() bool {
	for j := r.i + 1; j < len(r.b); j++ {
		switch r.b[j] {
		case '\\':
			j++
		case '"':
			r.i = j + 1
			return true
		}
	}
	return false
}

// DecodeSendRequest decodes the send request that b starts with into *req, keeping
// req.Recipients' room, as a json.Decoder with DisallowUnknownFields does: flat when it can
// (ReadSendRequestFlat), else with that decoder, whose error says what is wrong.
func DecodeSendRequest(b []byte, req *SendRequest) error {
	if ReadSendRequestFlat(b, req) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(req)
}

// ReadSendRequestFlat reads a send request into *req as a json.Decoder with
// DisallowUnknownFields reads a document holding just that object, keeping req.Recipients' room:
// its recipients flat, the rest (small) with encoding/json. It returns false, with *req's fields
// as they were, for a document it does not read so, for the caller to decode with encoding/json
// (DecodeSendRequest; the API, which names the field of an error its own way).
func ReadSendRequestFlat(b []byte, req *SendRequest) bool {
	v := SendRequest{Recipients: req.Recipients[:0]}
	r := NewFlatReader(b)
	rest := make([]byte, 0, 1024)
	rest = append(rest, '{')
	ok := r.Object(func(key string) bool {
		if key == "recipients" {
			var ok bool
			v.Recipients, ok = readRecipients(r, v.Recipients[:0])
			return ok
		}
		if strings.EqualFold(key, "recipients") {
			return false // encoding/json's to match without case
		}
		raw, ok := r.Skip()
		if len(rest) > 1 {
			rest = append(rest, ',')
		}
		rest = AppendJSONString(rest, key)
		rest = append(rest, ':')
		rest = append(rest, raw...)
		return ok
	})
	if !ok || !r.End() || v.Recipients == nil {
		return false
	}
	rest = append(rest, '}')
	dec := json.NewDecoder(bytes.NewReader(rest))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return false
	}
	*req = v
	return true
}
