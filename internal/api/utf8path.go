package api

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// jsonPathAt is the field path ("recipients[0].user_id") of the value or key of raw, one JSON
// value, that holds byte offset at: where invalid UTF-8 sits, so its 400 names the field. A
// byte outside every string, or a body that does not tokenize that far, gives the path reached.
func jsonPathAt(raw []byte, at int) string {
	type frame struct {
		obj     bool
		key     string
		idx     int
		wantKey bool
	}
	var stack []*frame
	path := func() string {
		var b []byte
		for _, f := range stack {
			if f.obj {
				if f.key != "" || !f.wantKey {
					if len(b) > 0 {
						b = append(b, '.')
					}
					b = append(b, f.key...)
				}
				continue
			}
			b = append(b, '[')
			b = strconv.AppendInt(b, int64(f.idx), 10)
			b = append(b, ']')
		}
		return string(b)
	}
	// valueDone moves the innermost container past the value that just ended.
	valueDone := func() {
		if len(stack) == 0 {
			return
		}
		if top := stack[len(stack)-1]; top.obj {
			top.wantKey = true
		} else {
			top.idx++
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	for {
		start := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return path()
		}
		end := dec.InputOffset()
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if s, ok := tok.(string); ok && top != nil && top.obj && top.wantKey {
			top.key, top.wantKey = s, false
			if at >= int(start) && at < int(end) {
				return path()
			}
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{obj: true, wantKey: true})
		case json.Delim('['):
			stack = append(stack, &frame{})
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			valueDone()
		default:
			if at >= int(start) && at < int(end) {
				return path()
			}
			valueDone()
		}
	}
}
