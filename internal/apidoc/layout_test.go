package apidoc

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestLayoutListsEveryPackage holds docs/design/layout.md's table to the module: every package
// `go list ./...` finds is named in its first column (in full, backticked), and every package
// path named there exists. Rows for what is not a package of this module (infra/, the docs, the
// clients' own modules, a folder of assets) are left alone.
func TestLayoutListsEveryPackage(t *testing.T) {
	root := filepath.Join("..", "..")
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		goBin = "go"
	}
	cmd := exec.Command(goBin, "list", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./...: %v", err)
	}
	var pkgs []string
	for _, p := range strings.Fields(string(out)) {
		pkgs = append(pkgs, strings.TrimPrefix(strings.TrimPrefix(p, "herald"), "/"))
	}
	raw, err := os.ReadFile(filepath.Join(root, "docs", "design", "layout.md"))
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	code := regexp.MustCompile("`([^`]+)`")
	for _, line := range strings.Split(string(raw), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 || !strings.HasPrefix(line, "| `") {
			continue
		}
		for _, m := range code.FindAllStringSubmatch(cells[1], -1) {
			named[m[1]] = true
		}
	}
	for _, p := range pkgs {
		if p != "" && !named[p] {
			t.Errorf("package %s is not in docs/design/layout.md's table", p)
		}
	}
	for p := range named {
		other := strings.HasPrefix(p, "infra") || strings.HasPrefix(p, "docs") || p == "clients/go" || p == "clients/typescript"
		if fi, err := os.Stat(filepath.Join(root, p)); err == nil && fi.IsDir() {
			other = other || !slices.Contains(pkgs, p) // a folder of assets or of packages, not a package itself
		}
		if !other && !slices.Contains(pkgs, p) {
			t.Errorf("docs/design/layout.md names %s, which is no package of the module", p)
		}
	}
	if len(pkgs) < 50 {
		t.Fatalf("go list found %d packages: %q", len(pkgs), out)
	}
}
