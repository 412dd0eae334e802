package apidoc

import (
	"os"
	"path/filepath"
	"strings"
)

// DocFiles are the project's Markdown documents under root: README.md, then every .md below docs/
// (the API reference and the design's pages included), in WalkDir's lexical order. The tests of
// the docs — links, examples — read these.
func DocFiles(root string) ([]string, error) {
	files := []string{filepath.Join(root, "README.md")}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return err
	})
	return files, err
}
