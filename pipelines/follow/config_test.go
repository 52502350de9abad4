package follow

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "config.toml")
	os.WriteFile(file, []byte(`
[[list]]
url = "https://lore.kernel.org/linuxppc-dev/"
paths = ["arch/powerpc/**"]
subject = "powerpc"
allow = ["*@linux.ibm.com"]
pipeline = "ppc-preempt-dynamic"
tree = "/srv/linux.git"
since = "2026-11-01"
quiet = "5m"

[[watch]]
remote = "elsewhere"
`), 0o644)
	ls, err := LoadConfig(file, nil)
	if err != nil {
		t.Fatal(err)
	}
	l := ls[0]
	if len(ls) != 1 || l.Name != "linuxppc-dev" || l.URL != "https://lore.kernel.org/linuxppc-dev" || l.Base != "tree" ||
		l.Quiet != 5*time.Minute || l.IncompleteAfter != 6*time.Hour || l.Poll != 5*time.Minute || l.RFC ||
		!l.Since.Equal(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)) || !l.Subject.MatchString("powerpc/time: x") {
		t.Errorf("list: %+v", l)
	}
	if ls, err := LoadConfig(filepath.Join(dir, "missing.toml"), nil); err != nil || ls != nil {
		t.Errorf("a missing file: %v, %v", ls, err)
	}
	os.WriteFile(file, []byte(`
[[list]]
url = "lore.kernel.org/x"
pipeline = "p"

[[list]]
url = "https://lore.kernel.org/a"
pipeline = "p"
subject = "("
base = "latest"
quiet = "soon"
colour = "blue"
`), 0o644)
	_, err = LoadConfig(file, nil)
	for _, want := range []string{"[[list]] #1: url \"lore.kernel.org/x\"", "[[list]] has no key \"colour\"", "[[list]] #2: base \"latest\""} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want it to name %q", err, want)
		}
	}
}
