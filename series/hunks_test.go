package series

import (
	"os"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/internal/testenv"
	"github.com/patcheval/patcheval/mbox"
)

// TestTruncatedPatchIsNoted: a patch whose mail ends mid-hunk resolves
// with a note naming the file and hunk (it resolved silently, and apply
// said only "fragment header miscounts lines").
func TestTruncatedPatchIsNoted(t *testing.T) {
	data, err := os.ReadFile(testenv.BackportMbox())
	if err != nil {
		t.Fatal(err)
	}
	s := resolveBytes(t, data)
	if len(s.Patches) == 0 || s.Patches[0].Broken != "" {
		t.Fatalf("the whole backport: %d patches, broken %q", len(s.Patches), s.Patches[0].Broken)
	}
	// Cut the patch's mail three lines into its last hunk.
	text := string(data)
	last := strings.LastIndex(text, "\n@@ -")
	if last < 0 {
		t.Fatal("no hunk in the backport")
	}
	cut := last + 1
	for i := 0; i < 4; i++ {
		cut += strings.IndexByte(text[cut:], '\n') + 1
	}
	end := strings.Index(text[cut:], "\nFrom mboxrd@z")
	truncated := text[:cut]
	if end >= 0 {
		truncated += text[cut+end:]
	}
	s = resolveBytes(t, []byte(truncated))
	var broken string
	for _, p := range s.Patches {
		broken += p.Broken
	}
	if !strings.Contains(broken, "hunk #") || !strings.Contains(broken, "arch/powerpc/") {
		t.Errorf("truncated patch: Broken %q, want the file and hunk", broken)
	}
	if !strings.Contains(strings.Join(s.Notes, "\n"), "cut short") {
		t.Errorf("no note about the cut: %q", s.Notes)
	}
}

func resolveBytes(t *testing.T, data []byte) *Series {
	t.Helper()
	msgs, err := mbox.ParseBytes(data, "backport")
	if err != nil {
		t.Fatal(err)
	}
	s, err := Resolve(mbox.NewThread(msgs, "backport"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}
