package sandbox

import (
	"embed"
	"net/http"
	"strings"
)

// The example web app: a page, its script and a service worker showing how a web app uses
// Herald's Web Push (subscribe with the VAPID key, register the subscription, show the push) and
// the live inbox (the WebSocket stream, resume, mark read). Plain files embedded in the binary,
// no build step; `herald dev` serves them at /sandbox/web/ in sandbox mode only. sw.js is served
// from that same directory, so its default scope (/sandbox/web/) covers the page.

//go:embed web
var webFiles embed.FS

// WebAppPrefix is where WebApp is mounted.
const WebAppPrefix = "/sandbox/web/"

// webAppFiles are the files served, by name under WebAppPrefix ("" is the page).
var webAppFiles = map[string]struct{ file, contentType string }{
	"":           {"index.html", "text/html; charset=utf-8"},
	"index.html": {"index.html", "text/html; charset=utf-8"},
	"app.js":     {"app.js", "text/javascript; charset=utf-8"},
	"sw.js":      {"sw.js", "text/javascript; charset=utf-8"}, // a service worker must be served as JavaScript
	"style.css":  {"style.css", "text/css; charset=utf-8"},
}

// WebApp serves the example web app under WebAppPrefix (mount it as "GET /sandbox/web/").
func WebApp() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, ok := webAppFiles[strings.TrimPrefix(r.URL.Path, WebAppPrefix)]
		if !ok || !strings.HasPrefix(r.URL.Path, WebAppPrefix) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"error":{"code":"not_found","message":"no such file in the example web app"}}`))
			return
		}
		b, err := webFiles.ReadFile("web/" + f.file)
		if err != nil { // every name served is embedded: a build mistake
			http.Error(w, "example web app file missing", http.StatusInternalServerError)
			return
		}
		h := w.Header()
		h.Set("Content-Type", f.contentType)
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		// Only its own files and its own origin's routes (the API, the stream: 'self' covers ws:
		// on the same host): no inline script, no third party.
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
		_, _ = w.Write(b)
	})
}
