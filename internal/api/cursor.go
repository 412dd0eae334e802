package api

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strings"

	"herald/internal/notify"
)

// Paging cursors are opaque and tamper-evident: next_cursor is base64url of a version byte, a
// MAC and the store's own cursor, the MAC covering the list it pages (an inbox, a
// notification's deliveries) as well. A cursor that was altered, truncated or made for another
// list fails the MAC and is refused with 400 naming "cursor", instead of being handed to the
// store, where some damage read as "first page" and some as an error.
const (
	cursorVersion = 1
	cursorMACLen  = 16
	maxCursorLen  = 2048
)

// CursorKeyFrom derives Options.CursorKey from a deployment secret (the contact encryption
// key): every instance of the deployment derives the same key, without a second secret to
// manage, and the secret itself is not used for two purposes.
func CursorKeyFrom(secret string) []byte {
	sum := sha256.Sum256([]byte("herald api cursor key\x00" + strings.TrimSpace(secret)))
	return sum[:]
}

// defaultCursorKey is used when Options.CursorKey is empty.
var defaultCursorKey = []byte("herald paging cursor v1")

func (s *server) cursorMAC(kind, scope, c string) []byte {
	key := s.cursorKey
	if len(key) == 0 {
		key = defaultCursorKey
	}
	m := hmac.New(sha256.New, key)
	for _, part := range []string{kind, scope, c} {
		m.Write([]byte(part))
		m.Write([]byte{0})
	}
	return m.Sum(nil)[:cursorMACLen]
}

// sealCursor wraps the store cursor c of the list kind/scope; "" (no more pages) stays "".
func (s *server) sealCursor(kind, scope, c string) string {
	if c == "" {
		return ""
	}
	b := make([]byte, 0, 1+cursorMACLen+len(c))
	b = append(b, cursorVersion)
	b = append(b, s.cursorMAC(kind, scope, c)...)
	b = append(b, c...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// queryCursor returns the store cursor in ?cursor= for the list kind/scope: "" for the first
// page, 400 naming "cursor" for one this API did not hand out for that list.
func (s *server) queryCursor(r *http.Request, kind, scope string) (string, error) {
	c := r.URL.Query().Get("cursor")
	if c == "" {
		return "", nil
	}
	bad := notify.FieldError("cursor", "not a cursor of this list; pass back the next_cursor of the previous page unchanged")
	if len(c) > maxCursorLen {
		return "", bad
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || len(b) < 1+cursorMACLen+1 || b[0] != cursorVersion {
		return "", bad
	}
	inner := string(b[1+cursorMACLen:])
	if !hmac.Equal(b[1:1+cursorMACLen], s.cursorMAC(kind, scope, inner)) {
		return "", bad
	}
	return inner, nil
}
