package pipeline

import (
	"strconv"

	"herald/internal/notify"
)

// A send batch carries up to 500 items from prepare to send: it is written and read as flat
// JSON (notify.FlatReader), the same bytes encoding/json writes, which reads anything else.

// flatJSON is a message body that writes itself (send); ok false means encoding/json writes it.
type flatJSON interface {
	appendJSON(dst []byte) (out []byte, ok bool)
}

// flatDecoder is a message body that reads itself (decode); false leaves it as it was, for
// encoding/json to read.
type flatDecoder interface {
	decodeFlat(body []byte) bool
}

// appendJSON writes m as json.Marshal does, unless it holds a quiet-hours hold (a time) or an
// item with earlier attempts (a retry's).
func (m sendMsg) appendJSON(dst []byte) ([]byte, bool) {
	if m.HoldUntil != nil {
		return dst, false
	}
	for i := range m.Items {
		if len(m.Items[i].History) > 0 {
			return dst, false // a retry's attempts: encoding/json's
		}
	}
	if dst == nil {
		dst = make([]byte, 0, 128+96*len(m.Items))
	}
	first := true
	dst = append(dst, '{')
	dst = notify.AppendJSONKey(dst, &first, "notification_id", m.NotificationID)
	dst = notify.AppendJSONKey(dst, &first, "provider", string(m.Provider))
	dst = notify.AppendJSONOmitEmpty(dst, &first, "app", m.App)
	if m.Retry != 0 {
		dst = append(dst, `,"retry":`...)
		dst = strconv.AppendInt(dst, int64(m.Retry), 10)
	}
	dst = notify.AppendJSONOmitEmpty(dst, &first, "batch", m.BatchID)
	if m.Items == nil {
		dst = append(dst, `,"items":null}`...)
		return dst, true
	}
	dst = append(dst, `,"items":[`...)
	for i := range m.Items {
		it := &m.Items[i]
		if i > 0 {
			dst = append(dst, ',')
		}
		first := true
		dst = append(dst, '{')
		dst = notify.AppendJSONKey(dst, &first, "id", it.DeliveryID)
		dst = notify.AppendJSONKey(dst, &first, "address", it.Address)
		dst = notify.AppendJSONOmitEmpty(dst, &first, "locale", it.Locale)
		dst = notify.AppendJSONOmitEmpty(dst, &first, "env", it.Environment)
		dst = notify.AppendJSONOmitEmpty(dst, &first, "user", it.UserID)
		dst = notify.AppendJSONOmitEmpty(dst, &first, "fallback_of", it.FallbackOf)
		dst = notify.AppendJSONOmitEmpty(dst, &first, "kind", it.Kind)
		dst = append(dst, '}')
	}
	return append(dst, ']', '}'), true
}

// decodeFlat reads body into m (whose Items' room it keeps) when it is flat JSON it can read as
// encoding/json would; false leaves m's fields as they were before, for encoding/json to read.
func (m *sendMsg) decodeFlat(body []byte) bool {
	v := sendMsg{Items: m.Items[:0]}
	r := notify.NewFlatReader(body)
	str := func(f *string) bool {
		s, ok := r.String()
		*f = s
		return ok
	}
	ok := r.Object(func(key string) bool {
		switch key {
		case "notification_id":
			return str(&v.NotificationID)
		case "provider":
			var p string
			ok := str(&p)
			v.Provider = notify.Provider(p)
			return ok
		case "app":
			return str(&v.App)
		case "batch":
			return str(&v.BatchID)
		case "retry":
			n, ok := r.Int()
			v.Retry = n
			return ok
		case "items":
			return r.Array(func() bool {
				v.Items = append(v.Items, sendItem{})
				it := &v.Items[len(v.Items)-1]
				return r.Object(func(key string) bool {
					switch key {
					case "id":
						return str(&it.DeliveryID)
					case "address":
						return str(&it.Address)
					case "locale":
						return str(&it.Locale)
					case "env":
						return str(&it.Environment)
					case "user":
						return str(&it.UserID)
					case "fallback_of":
						return str(&it.FallbackOf)
					case "kind":
						return str(&it.Kind)
					}
					return false
				})
			})
		}
		return false // hold_until (a time), history (a retry's), a null, anything else: encoding/json's
	})
	if !ok || !r.End() {
		return false
	}
	*m = v
	return true
}
