// Command gen writes the API reference (internal/apidoc) from internal/api/openapi.json into a
// directory: `make docs` runs it into docs/api.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"herald/internal/apidoc"
)

func main() {
	in := flag.String("openapi", "internal/api/openapi.json", "the OpenAPI document")
	out := flag.String("out", "docs/api", "the directory to write the reference into")
	flag.Parse()
	raw, err := os.ReadFile(*in)
	if err == nil {
		err = write(raw, *out)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "apidoc:", err)
		os.Exit(1)
	}
}

func write(raw []byte, dir string) error {
	files, err := apidoc.Generate(raw)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}
	fmt.Printf("apidoc: wrote %d pages into %s\n", len(files), dir)
	return nil
}
