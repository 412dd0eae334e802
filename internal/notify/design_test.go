package notify_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var (
	// designRef is a reference to sections of the design document: "docs/design.md §4",
	// "docs/design.md §6 and §10", "docs/design.md §3, §4".
	designRef = regexp.MustCompile(`docs/design\.md((?:(?:,| and| or)? §\d+)+)`)
	sectionNo = regexp.MustCompile(`§(\d+)`)
	// designHeading is a numbered section of docs/design.md: "## 4. Campaigns".
	designHeading = regexp.MustCompile(`(?m)^## (\d+)\. \S`)
	// oldDesignRef is the form references had before the document lived in the repository.
	oldDesignRef = regexp.MustCompile(`\bDESIGN(?:\.md)? ?§`)
)

// TestDesignReferencesResolve: every "docs/design.md §N" in the repository's Go and Markdown
// files names a section docs/design.md has, and none points at a design file outside it.
func TestDesignReferencesResolve(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "design.md"))
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]bool{}
	for _, m := range designHeading.FindAllStringSubmatch(string(doc), -1) {
		sections[m[1]] = true
	}
	for n := 1; n <= 12; n++ { // the sections code and README refer to, and security, operations
		if !sections[strconv.Itoa(n)] {
			t.Errorf("docs/design.md has no section \"## %d.\"", n)
		}
	}

	refs := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", "cdk.out", ".tools", ".herald", "bin":
				return filepath.SkipDir
			}
			return nil
		}
		if ext := filepath.Ext(path); ext != ".go" && ext != ".md" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		for i, line := range strings.Split(string(b), "\n") {
			if oldDesignRef.MatchString(line) && rel != filepath.Join("internal", "notify", "design_test.go") {
				t.Errorf("%s:%d: %q: refer to docs/design.md §N", rel, i+1, strings.TrimSpace(line))
			}
			for _, m := range designRef.FindAllStringSubmatch(line, -1) {
				for _, n := range sectionNo.FindAllStringSubmatch(m[1], -1) {
					refs++
					if !sections[n[1]] {
						t.Errorf("%s:%d: %s names section %s, which docs/design.md does not have", rel, i+1, m[0], n[1])
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if refs == 0 {
		t.Fatal("found no docs/design.md §N reference at all: the walk or the pattern is wrong")
	}
}
