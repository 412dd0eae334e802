package apidoc

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestDocLinksResolve follows every relative link of README.md and docs/ (the API reference
// included): the file it names exists, and the anchor it names is a heading of that file, as a
// Markdown renderer makes anchors of headings.
func TestDocLinksResolve(t *testing.T) {
	root := "../.."
	files, err := DocFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	checked := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text := stripCode(string(raw))
		for _, m := range link.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			path := f
			if file != "" {
				path = filepath.Join(filepath.Dir(f), file)
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s: link %s: no such file", rel(root, f), target)
					continue
				}
			}
			checked++
			if anchor == "" || !strings.HasSuffix(path, ".md") {
				continue
			}
			if !anchors(t, path)[anchor] {
				t.Errorf("%s: link %s: %s has no heading with that anchor", rel(root, f), target, rel(root, path))
			}
		}
	}
	if checked < 10 {
		t.Fatalf("only %d relative links followed: the scan is broken", checked)
	}
}

var fence = regexp.MustCompile("(?s)```.*?```")

// stripCode drops fenced blocks, whose brackets are code, not links.
func stripCode(s string) string { return fence.ReplaceAllString(s, "") }

var headingRe = regexp.MustCompile(`(?m)^#{1,6}\s+(.+?)\s*$`)

// anchors are the anchors a renderer makes of a file's headings: lower case, spaces to
// hyphens, punctuation but hyphens and underscores dropped, repeats numbered.
func anchors(t *testing.T, path string) map[string]bool {
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	seen := map[string]int{}
	for _, m := range headingRe.FindAllStringSubmatch(stripCode(string(raw)), -1) {
		var b strings.Builder
		for _, r := range strings.ToLower(strings.ReplaceAll(m[1], "`", "")) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out[a+"-"+strconv.Itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

func rel(root, p string) string {
	r, err := filepath.Rel(root, p)
	if err != nil {
		return p
	}
	return r
}
