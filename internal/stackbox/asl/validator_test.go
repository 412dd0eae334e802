package asl_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// validator returns the asl-validator command from HERALD_ASL_VALIDATOR (scripts/asl-validate.sh,
// which make test sets; a relative path is taken from the repository root), or skips.
func validator(t *testing.T) string {
	t.Helper()
	v := os.Getenv("HERALD_ASL_VALIDATOR")
	if v == "" {
		t.Skip("HERALD_ASL_VALIDATOR is unset: set it to scripts/asl-validate.sh (make test does) to check the definitions with asl-validator")
	}
	if !filepath.IsAbs(v) {
		v = filepath.Join("..", "..", "..", v)
	}
	return v
}

func validate(t *testing.T, cmd, file string) (string, error) {
	t.Helper()
	out, err := exec.Command(cmd, file).CombinedOutput()
	return string(out), err
}

// TestDefinitionsAreValidASL checks every checked-in definition with the real asl-validator,
// so the fixtures the interpreter runs are definitions Step Functions would accept.
func TestDefinitionsAreValidASL(t *testing.T) {
	cmd := validator(t)
	files, err := filepath.Glob("testdata/*.asl.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata/*.asl.json (%v)", err)
	}
	for _, f := range files {
		if out, err := validate(t, cmd, f); err != nil {
			t.Errorf("%s is not valid ASL: %v\n%s", f, err, out)
		}
	}
	// And the validator does refuse an invalid one, so a pass above means something.
	bad := filepath.Join(t.TempDir(), "bad.asl.json")
	if err := os.WriteFile(bad, []byte(`{"StartAt":"A","States":{"A":{"Type":"Task","End":true}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := validate(t, cmd, bad)
	if err == nil || !strings.Contains(out, "invalid") {
		t.Fatalf("a Task without Resource passed the validator: %v\n%s", err, out)
	}
}
