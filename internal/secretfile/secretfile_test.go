package secretfile

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/internal/fail"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "token")
	if err := os.WriteFile(p, []byte("s3cret-token-value\nignored\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := Read("--token-file", p); err != nil || got != "s3cret-token-value" {
		t.Fatalf("Read(0600) = %q, %v", got, err)
	}
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604} {
		os.Chmod(p, mode)
		_, err := Read("--token-file", p)
		if err == nil || fail.KindOf(err) != fail.KindInput || !strings.Contains(err.Error(), "chmod 600") ||
			strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "\n") {
			t.Errorf("Read(%04o) = %v, want one bad-input line saying chmod 600, no secret", mode, err)
		}
	}
	t.Setenv(Env, "warn")
	var w bytes.Buffer
	Warnings = &w
	defer func() { Warnings = os.Stderr }()
	if got, err := Read("--token-file", p); err != nil || got != "s3cret-token-value" || !strings.Contains(w.String(), "readable by its group or others") {
		t.Errorf("Read with %s=warn = %q, %v, warning %q", Env, got, err, w.String())
	}
	t.Setenv(Env, "maybe")
	if _, err := Read("--token-file", p); err == nil {
		t.Errorf("%s=maybe accepted", Env)
	}
}
