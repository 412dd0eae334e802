package local

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// browserTab starts the chromium HERALD_CHROMIUM names (skipping the test when it is not set)
// with a window of width×height, closed when the test ends. It returns the tab's context (at most
// two minutes), run, which fails the test when actions fail, and shot, which keeps a screenshot
// named prefix+name in HERALD_SCREENSHOTS (default: the test's temporary directory). Called after
// the test's server starts, so the browser, closed first, holds no connection the server waits on.
func browserTab(t *testing.T, width, height int, prefix string) (context.Context, func(what string, actions ...chromedp.Action), func(name string)) {
	t.Helper()
	chromium := os.Getenv("HERALD_CHROMIUM")
	if chromium == "" {
		t.Skip("HERALD_CHROMIUM is not set: `make browser` installs chromium (apt-get install -y chromium, as root) and `make test` sets it")
	}
	shots := os.Getenv("HERALD_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	}
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots in %s", shots)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox,
		chromedp.WindowSize(width, height))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelA)
	bctx, cancelB := chromedp.NewContext(actx)
	t.Cleanup(cancelB)
	bctx, cancelT := context.WithTimeout(bctx, 2*time.Minute)
	t.Cleanup(cancelT)
	run := func(what string, actions ...chromedp.Action) {
		t.Helper()
		if err := chromedp.Run(bctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	shot := func(name string) {
		t.Helper()
		var png []byte
		run("screenshot "+name, chromedp.FullScreenshot(&png, 100))
		if err := os.WriteFile(filepath.Join(shots, prefix+name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return bctx, run, shot
}
