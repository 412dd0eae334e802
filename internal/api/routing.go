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
	return false
}
