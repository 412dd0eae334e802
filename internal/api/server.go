package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Connection limits of NewServer where ServerLimits leaves them zero.
const (
	// DefaultReadTimeout bounds reading a whole request, body included: a client that trickles a
	// body (or never sends the bytes its Content-Length promised) loses the connection after it
	// instead of holding it forever.
	DefaultReadTimeout       = 30 * time.Second
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultWriteTimeout bounds a request from the end of its headers to the end of the
	// response; the API's slowest handlers take milliseconds.
	DefaultWriteTimeout = 60 * time.Second
	// DefaultIdleTimeout closes keep-alive connections that carry no request for this long.
	DefaultIdleTimeout = 120 * time.Second
	// DefaultMaxHeaderBytes is the request line and headers net/http reads before it answers 431
	// itself. The handler refuses, as JSON, headers over MaxHeaderBytes (below this), so only a
	// request far over the limit reaches net/http's own answer — which JSONErrors rewrites.
	DefaultMaxHeaderBytes = 64 << 10
)

// MaxHeaderBytes is the size of a request's line and headers the handler accepts; over it
// answers 431 as JSON.
const MaxHeaderBytes = 32 << 10

// ServerLimits bound the connections of the server that serves the API; zero fields take the
// defaults above.
type ServerLimits struct {
	ReadTimeout       time.Duration
	ReadHeaderTimeout time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration
	MaxHeaderBytes    int
}

// WithDefaults returns l with every zero field set to its default.
func (l ServerLimits) WithDefaults() ServerLimits {
	if l.ReadTimeout <= 0 {
		l.ReadTimeout = DefaultReadTimeout
	}
	if l.ReadHeaderTimeout <= 0 {
		l.ReadHeaderTimeout = min(DefaultReadHeaderTimeout, l.ReadTimeout)
	}
	if l.WriteTimeout <= 0 {
		l.WriteTimeout = DefaultWriteTimeout
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = DefaultIdleTimeout
	}
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	return l
}

// NewServer returns an http.Server for h with every connection bounded by l (defaults for
// zero fields). Serve it on JSONErrors(listener) so that the answers net/http writes itself are
// JSON too.
func NewServer(h http.Handler, l ServerLimits) *http.Server {
	l = l.WithDefaults()
	return &http.Server{
		Handler:           h,
		ReadTimeout:       l.ReadTimeout,
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		WriteTimeout:      l.WriteTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    l.MaxHeaderBytes,
	}
}

// JSONErrors wraps ln so that the few answers net/http writes itself, before any handler runs,
// take the API's error shape {"error": {"code", "field", "message"}} instead of plain text: a
// request line it cannot parse (a malformed percent-escape such as /v1/users/%zz/inbox, a
// missing Host), headers over the server's MaxHeaderBytes (431), an unsupported transfer
// encoding (501).
//
// net/http offers no hook for these: it writes each as one Write on the raw connection, of
// exactly "HTTP/1.1 <status>" + "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection:
// close\r\n\r\n" + text. That write is recognised and replaced; anything else passes through
// untouched (a handler's response always carries a Date header, so it never matches). Over TLS
// (HTTP/2 included) the connection is not a plain one and nothing is rewritten.
func JSONErrors(ln net.Listener) net.Listener { return jsonErrorListener{ln} }

type jsonErrorListener struct{ net.Listener }

func (l jsonErrorListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &jsonErrorConn{Conn: c}, nil
}

type jsonErrorConn struct{ net.Conn }

// plainErrorHeaders is what net/http puts between the status line and the text of the answers
// it writes itself.
const plainErrorHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

func (c *jsonErrorConn) Write(b []byte) (int, error) {
	if out, ok := jsonServerError(b); ok {
		if _, err := c.Conn.Write(out); err != nil {
			return 0, err
		}
		return len(b), nil
	}
	return c.Conn.Write(b)
}

// CloseWrite keeps net/http's half-close after a 431 (it flushes the answer, then stops
// writing while it drains the request).
func (c *jsonErrorConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// jsonServerError rewrites one of net/http's own plain-text error answers as JSON.
func jsonServerError(b []byte) ([]byte, bool) {
	const prefix = "HTTP/1.1 "
	if len(b) > 4096 || !bytes.HasPrefix(b, []byte(prefix)) {
		return nil, false
	}
	statusLine, text, ok := bytes.Cut(b[len(prefix):], []byte(plainErrorHeaders))
	if !ok || bytes.ContainsAny(statusLine, "\r\n") || bytes.ContainsAny(text, "\r\n") || len(statusLine) < 3 {
		return nil, false
	}
	status, err := strconv.Atoi(string(statusLine[:3]))
	if err != nil || status < 400 || status > 599 {
		return nil, false
	}
	code, msg := "invalid", "malformed request"
	switch status {
	case http.StatusRequestHeaderFieldsTooLarge:
		code, msg = "too_large", "the request line and headers are too large"
	case http.StatusNotImplemented:
		code, msg = codeNotImplemented, "unsupported transfer encoding"
	case http.StatusBadRequest:
		// The text is net/http's, e.g. "400 Bad Request: missing required Host header"; the
		// bare "400 Bad Request" is a request line it could not parse.
		if _, detail, ok := strings.Cut(string(text), ": "); ok {
			msg = "malformed request: " + detail
		} else {
			msg = "malformed request line: the method, the path (a percent-escape such as %zz is not valid) or the protocol version could not be parsed"
		}
	default:
		code, msg = "invalid", string(text)
	}
	body, _ := json.Marshal(errorBody{Error: errorDetail{Code: code, Message: msg}})
	body = append(body, '\n')
	out := fmt.Appendf(nil, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nX-Content-Type-Options: nosniff\r\nCache-Control: no-store\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s",
		status, http.StatusText(status), len(body), body)
	return out, true
}
