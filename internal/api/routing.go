package api

import (
	"net/http"
	"net/url"
	"path"
	"strings"

	"herald/internal/notify"
)

// headerBytes is the size of r's request line and headers as they came on the wire, near
// enough: what net/http's MaxHeaderBytes limits.
func headerBytes(r *http.Request) int {
	n := len(r.Method) + len(r.RequestURI) + len(r.Proto) + 4 + len("Host: \r\n") + len(r.Host)
	for k, vs := range r.Header {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return n
}

// refuseMalformed answers, as JSON, the requests the router must not see: headers over
// MaxHeaderBytes (431), a path that does not unescape, or one with empty, "." or ".." segments,
// which ServeMux would otherwise answer with a plain-text redirect to the cleaned path. It
// reports whether it answered.
func (s *server) refuseMalformed(w http.ResponseWriter, r *http.Request) bool {
	if headerBytes(r) > MaxHeaderBytes {
		writeJSON(w, http.StatusRequestHeaderFieldsTooLarge, errorBody{Error: errorDetail{
			Code:    notify.ETOOLARGE,
			Message: "the request line and headers are larger than 32 KiB",
		}})
		return true
	}
	p := r.URL.EscapedPath()
	if !strings.HasPrefix(p, "/") {
		s.writeError(w, r, notify.FieldError("path", "the path must start with /"))
		return true
	}
	if _, err := url.PathUnescape(r.URL.RawPath); err != nil {
		s.writeError(w, r, notify.FieldError("path", "the path has a malformed percent-escape"))
		return true
	}
	clean := path.Clean(p)
	if strings.HasSuffix(p, "/") && clean != "/" {
		clean += "/"
	}
	if clean != p {
		s.writeError(w, r, notify.FieldError("path", "the path has empty, \".\" or \"..\" segments; send the canonical path %s", clean))
		return true
	}
	// The same segments written as escapes (%2e%2e) decode to what the check above refuses.
	for _, seg := range strings.Split(r.URL.Path, "/") {
		if seg == "." || seg == ".." {
			s.writeError(w, r, notify.FieldError("path", "the path has an encoded \".\" or \"..\" segment"))
			return true
		}
	}
	// A malformed escape in the query would be dropped silently by r.URL.Query(): the filter
	// it was meant to be would not apply. Refused, naming the parameter.
	if _, err := url.ParseQuery(r.URL.RawQuery); err != nil {
		s.writeError(w, r, notify.FieldError(malformedQueryKey(r.URL.RawQuery), "malformed percent-escape or separator in the query: %v", err))
		return true
	}
	return false
}

// malformedQueryKey names the first query parameter that does not unescape ("query" when even
// its name does not).
func malformedQueryKey(raw string) string {
	for _, part := range strings.Split(raw, "&") {
		k, v, _ := strings.Cut(part, "=")
		key, kerr := url.QueryUnescape(k)
		if kerr != nil || strings.Contains(k, ";") {
			return "query"
		}
		if _, err := url.QueryUnescape(v); err != nil {
			return key
		}
	}
	return "query"
}
