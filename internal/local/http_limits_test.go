package local

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"herald/internal/api"
	"herald/internal/config"
)

// startWithLimits starts a runtime whose API server has the given connection limits.
func startWithLimits(t *testing.T, limits api.ServerLimits) *Runtime {
	t.Helper()
	rt, err := Start(context.Background(), Options{Config: config.Dev(), DataDir: t.TempDir(), Addr: "127.0.0.1:0",
		Logger: slog.New(slog.DiscardHandler), HTTP: limits})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := rt.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return rt
}

// closedWithin reads c until the server closes it (or bound passes) and returns what it read
// and how long the connection stayed open.
func closedWithin(t *testing.T, c net.Conn, bound time.Duration) ([]byte, time.Duration) {
	t.Helper()
	start := time.Now()
	_ = c.SetReadDeadline(start.Add(bound))
	got, err := io.ReadAll(c)
	took := time.Since(start)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("the server kept the connection open for %v (read %q)", bound, got)
	}
	return got, took
}

// TestTricklingBodyIsCut: a POST whose body trickles in (one byte every 3 s of a promised
// 100000) loses its connection at the read timeout, with a JSON 408, instead of holding it
// forever. The timeout is shortened here; TestDefaultConnectionLimits checks the default.
func TestTricklingBodyIsCut(t *testing.T) {
	t.Parallel()
	rt := startWithLimits(t, api.ServerLimits{ReadTimeout: 4 * time.Second})
	c, err := net.Dial("tcp", strings.TrimPrefix(rt.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /v1/notifications HTTP/1.1\r\nHost: herald\r\nAuthorization: Bearer dev-demo-key\r\n"+
		"Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{")
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		tick := time.NewTicker(3 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, err := c.Write([]byte(" ")); err != nil {
					return
				}
			}
		}
	}()
	got, took := closedWithin(t, c, 30*time.Second)
	resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(string(got))), nil)
	if err != nil {
		t.Fatalf("after %v: no response before the close: %q", took, got)
	}
	var body struct {
		Error struct{ Code string } `json:"error"`
	}
	if resp.StatusCode != http.StatusRequestTimeout || json.NewDecoder(resp.Body).Decode(&body) != nil || body.Error.Code != "request_timeout" {
		t.Fatalf("after %v: got %q, want a JSON 408", took, got)
	}
}

// TestIdleConnectionsClose: a keep-alive connection that carries no further request is closed.
func TestIdleConnectionsClose(t *testing.T) {
	t.Parallel()
	rt := startWithLimits(t, api.ServerLimits{IdleTimeout: time.Second})
	c, err := net.Dial("tcp", strings.TrimPrefix(rt.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: herald\r\n\r\n")
	got, _ := closedWithin(t, c, 20*time.Second)
	if !strings.HasPrefix(string(got), "HTTP/1.1 200") {
		t.Fatalf("got %q, want the health answer before the close", got)
	}
}

// TestDefaultConnectionLimits: without settings, the API's server bounds every connection, and
// a trickled request is cut within 30 s.
func TestDefaultConnectionLimits(t *testing.T) {
	t.Parallel()
	e := setup(t)
	s := e.rt.server
	if s.ReadTimeout <= 0 || s.ReadTimeout > 30*time.Second {
		t.Errorf("ReadTimeout = %v, want (0, 30s]", s.ReadTimeout)
	}
	if s.ReadHeaderTimeout <= 0 || s.ReadHeaderTimeout > s.ReadTimeout {
		t.Errorf("ReadHeaderTimeout = %v", s.ReadHeaderTimeout)
	}
	if s.WriteTimeout <= 0 || s.IdleTimeout <= 0 {
		t.Errorf("WriteTimeout = %v, IdleTimeout = %v, want both set", s.WriteTimeout, s.IdleTimeout)
	}
	if s.MaxHeaderBytes != 64<<10 {
		t.Errorf("MaxHeaderBytes = %d, want 64 KiB", s.MaxHeaderBytes)
	}
}

// TestMalformedRequestLineIsJSON: what net/http refuses before the handler runs is JSON too.
func TestMalformedRequestLineIsJSON(t *testing.T) {
	t.Parallel()
	e := setup(t)
	c, err := net.Dial("tcp", strings.TrimPrefix(e.rt.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /v1/users/%%zz/inbox HTTP/1.1\r\nHost: herald\r\nAuthorization: Bearer dev-demo-key\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != 400 ||
		resp.Header.Get("Content-Type") != "application/json" || body.Error.Code != "invalid" {
		t.Fatalf("%d %s: %+v %v", resp.StatusCode, resp.Header.Get("Content-Type"), body, err)
	}
}
