package api

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"testing"
	"unicode/utf8"
)

// FuzzScanKeys holds scanKeys to what encoding/json's tokens say of a valid JSON document: the
// same duplicate key at the same path, and the same keys met before it.
func FuzzScanKeys(f *testing.F) {
	for _, seed := range []string{
		`{"a":1,"b":{"c":[1,{"d":1,"d":2}]}}`, `[{"a":1},{"a":1,"a":2}]`, `{"a":{},"b":[],"a":1}`,
		`{"a":"}{\"[","b":["]",{"a":1}],"a":0}`, "{\"a\":1,\"\\u0061\":2}", ` {"x":[true,null,-1.5e3],"y":{}} `,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) || !utf8.Valid(raw) { // decodeJSON refuses invalid UTF-8 first
			scanKeys(raw) // must not panic; what it finds, decoding overrules
			return
		}
		dup, keys, found := scanKeys(raw)
		wdup, wkeys, wfound := scanKeysWithTokens(raw)
		if dup != wdup || found != wfound || !slices.Equal(slices.Sorted(maps.Keys(keys)), slices.Sorted(maps.Keys(wkeys))) {
			t.Fatalf("scanKeys(%q) = %q %v %v; the tokens say %q %v %v", raw, dup, found, keys, wdup, wfound, wkeys)
		}
	})
}

// scanKeysWithTokens is scanKeys as it was, on encoding/json's Decoder.Token: slow, and the
// reference FuzzScanKeys holds scanKeys to.
func scanKeysWithTokens(raw []byte) (dup string, keys map[string]struct{}, found bool) {
	keys = map[string]struct{}{}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var top *keyFrame
	afterValue := func() {
		if top == nil {
			return
		}
		if top.object {
			top.wantKey = true
		} else {
			top.n++
		}
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			return "", keys, false
		}
		if top != nil && top.object && top.wantKey {
			if k, ok := tok.(string); ok {
				if slices.Contains(top.keys, k) {
					return joinPath(top.path(), k), keys, true
				}
				top.keys = append(top.keys, k)
				keys[k] = struct{}{}
				top.key, top.wantKey = k, false
				continue
			}
			// '}': the object ends.
			top = top.parent
			afterValue()
		} else if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{', '[':
				f := &keyFrame{object: d == '{', parent: top, wantKey: d == '{'}
				if top != nil {
					f.pkey, f.pidx = top.key, top.n
				}
				top = f
				continue
			default: // ']'
				top = top.parent
				afterValue()
			}
		} else {
			afterValue()
		}
		if top == nil {
			return "", keys, false
		}
	}
}
