package debian_test

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/internal/debian"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/testenv"
	"github.com/patcheval/patcheval/internal/xdg"
)

// TestSidPackage fetches a small package of a suite the system's sources
// do not list (b4 0.16.0-1, sid) through the machine's mirror, checks it,
// and refuses a damaged copy; a damaged copy in the download directory is
// replaced.
func TestSidPackage(t *testing.T) {
	testenv.SkipIfSlow(t, "Debian's mirror")
	var log bytes.Buffer
	a := debian.Shared(xdg.CacheDir(), "amd64", &log)
	ctx := context.Background()
	p, err := a.Find(ctx, "b4", "0.16.0-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Find(ctx, "b4", "0.0.1-1"); fail.KindOf(err) != fail.KindInput || !strings.Contains(err.Error(), "0.16.0-1") {
		t.Errorf("Find of a version sid does not serve: %v, want bad input listing what it serves", err)
	}
	dir := t.TempDir()
	deb, err := a.Download(ctx, p, dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := debian.Verify(deb, p); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(deb)
	data[len(data)/2] ^= 0xff
	os.WriteFile(deb, data, 0o644)
	if err := debian.Verify(deb, p); fail.KindOf(err) != fail.KindInput || !strings.Contains(err.Error(), "SHA256") {
		t.Errorf("Verify of a damaged copy: %v, want bad input naming the SHA256", err)
	}
	if again, err := a.Download(ctx, p, dir); err != nil || again != deb || debian.Verify(deb, p) != nil {
		t.Errorf("Download over a damaged copy: %v", err)
	}
	if !strings.Contains(log.String(), "fetching it again") {
		t.Errorf("the damaged copy was not noticed:\n%s", log.String())
	}
}
