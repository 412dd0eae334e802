package api

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"herald/internal/notify"
)

// errorBody is every error response: {"error": {"code", "field", "message"}}.
type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

// statusFor maps an error code to an HTTP status. Codes a caller can do nothing about are 500.
func statusFor(code string) int {
	switch code {
	case notify.EINVALID:
		return http.StatusBadRequest
	case notify.EUNAUTHORIZED:
		return http.StatusUnauthorized
	case notify.EFORBIDDEN:
		return http.StatusForbidden
	case notify.ENOTFOUND:
		return http.StatusNotFound
	case notify.ECONFLICT, notify.EKEYREUSED, notify.EFINISHED:
		return http.StatusConflict
	case notify.ETOOLARGE:
		return http.StatusRequestEntityTooLarge
	case codeRequestTimeout:
		return http.StatusRequestTimeout
	default:
		return http.StatusInternalServerError
	}
}

// writeError renders err. A 500 carries a generic message; its detail goes only to the log.
func (s *server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	code := notify.ErrorCode(err)
	status := statusFor(code)
	d := errorDetail{Code: code, Message: notify.ErrorMessage(err)}
	var e *notify.Error
	if errors.As(err, &e) {
		d.Field = e.Field
	}
	if status == http.StatusInternalServerError {
		s.log.ErrorContext(r.Context(), "request failed",
			slog.String("method", r.Method), slog.String("route", r.Pattern),
			slog.String("service", serviceOf(r)), slog.String("code", code), slog.String("error", err.Error()))
		d = errorDetail{Code: code, Message: "internal error; it has been logged, try again later"}
	}
	writeJSON(w, status, errorBody{Error: d})
}

// writeJSON writes v with status. v is always one of this package's response types, so a
// marshalling failure is a bug; it still gets a well-formed 500.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"code":"internal","message":"internal error"}}`)
	}
	if e, ok := v.(errorBody); ok {
		if sw, ok := w.(*statusWriter); ok {
			sw.errCode = e.Error.Code
		}
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// jsonKind names the JSON type a Go type is decoded from.
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "a different type"
	}
	if t == reflect.TypeFor[time.Time]() {
		return "an RFC 3339 time string"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return "a " + t.Kind().String()
}

// printable is 1+ printable ASCII characters without spaces.
var printable = regexp.MustCompile(`^[\x21-\x7e]+$`)

// pathParamLimits are the maximum lengths of path parameters; every one is printable ASCII.
var pathParamLimits = map[string]int{
	"user":  128,
	"id":    128,
	"token": 4096,
}

// pathParams lists the {name} wildcards of a mux path.
func pathParams(path string) []string {
	var out []string
	for _, seg := range strings.Split(path, "/") {
		if strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") {
			out = append(out, strings.TrimSuffix(strings.TrimPrefix(seg, "{"), "}"))
		}
	}
	return out
}

func checkPathParam(name, v string) error {
	limit := pathParamLimits[name]
	if limit == 0 {
		limit = 128
	}
	if len(v) > limit || !printable.MatchString(v) {
		return notify.FieldError(name, "must be 1–%d printable ASCII characters without spaces", limit)
	}
	return nil
}

// filterParam is one optional query filter value and the field it came from.
type filterParam struct{ name, v string }

// checkFilterParams checks optional filter values: each set one is 1–256 printable ASCII
// characters without spaces.
func checkFilterParams(ps ...filterParam) error {
	for _, p := range ps {
		if p.v != "" && (len(p.v) > 256 || !printable.MatchString(p.v)) {
			return notify.FieldError(p.name, "must be 1–256 printable ASCII characters without spaces")
		}
	}
	return nil
}

// oneOf lists the allowed values of an enumerated field for its error message.
func oneOf[T ~string](vs []T) string {
	names := make([]string, len(vs))
	for i, v := range vs {
		names[i] = string(v)
	}
	return strings.Join(names, ", ")
}

// queryLimit parses ?limit=, default def, between 1 and max.
func queryLimit(r *http.Request, def, max int) (int, error) {
	s := r.URL.Query().Get("limit")
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > max {
		return 0, notify.FieldError("limit", "must be an integer between 1 and %d", max)
	}
	return n, nil
}

// utc renders times in UTC, whatever zone the clock or store returned them in.
func utc(t time.Time) time.Time { return t.UTC() }

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
