package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/internal/testenv"
)

// TestReadmeFirstScreen: the README opens with the quickstart a maintainer
// needs (install, lore, --am-out, evaluate on their own tree, what it
// costs), names every command once in its table, keeps the guide's two
// set-up commands, and speaks no "seed NNN" jargon.
func TestReadmeFirstScreen(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(testenv.ModuleRoot(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	first := strings.Join(lines[:min(50, len(lines))], "\n")
	for _, want := range []string{"scripts/install", "patcheval lore <msgid>", "--am-out", "--pipeline default --tree ~/linux", "compiles/s", "bench/firstrun-results.md"} {
		if !strings.Contains(first, want) {
			t.Errorf("README's first 50 lines lack %q", want)
		}
	}
	for name := range commands {
		if n := strings.Count(string(data), "| `"+name+"` |"); n != 1 {
			t.Errorf("README's command table names %q %d times, want once", name, n)
		}
	}
	for _, want := range []string{"\n    scripts/main-job\n", "\n    scripts/test\n", "## Architecture", "Where a change goes", "Imports run one way"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("README lacks %q", want)
		}
	}
	docs, _ := filepath.Glob(filepath.Join(testenv.ModuleRoot(), "docs", "*.md"))
	jargon := regexp.MustCompile(`(?i)\bseeds? \d{3}`)
	for _, f := range append(docs, filepath.Join(testenv.ModuleRoot(), "README.md")) {
		b, _ := os.ReadFile(f)
		if m := jargon.Find(b); m != nil {
			t.Errorf("%s: %q: say which thread", filepath.Base(f), m)
		}
	}
}

// TestDocLinks: every relative link in the README and docs/ reaches a file,
// and its #anchor a heading of that file.
func TestDocLinks(t *testing.T) {
	root := testenv.ModuleRoot()
	files, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	files = append(files, filepath.Join(root, "README.md"), filepath.Join(root, "pipelines", "README.md"))
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	checked := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(target, "#")
			dest := f
			if path != "" {
				dest = filepath.Join(filepath.Dir(f), path)
			}
			rel, _ := filepath.Rel(root, f)
			checked++
			db, err := os.ReadFile(dest)
			if err != nil {
				if st, serr := os.Stat(dest); serr == nil && st.IsDir() {
					continue
				}
				t.Errorf("%s: link %s: %v", rel, target, err)
				continue
			}
			if anchor != "" && !hasAnchor(string(db), anchor) {
				t.Errorf("%s: link %s: no heading with that anchor", rel, target)
			}
		}
	}
	if checked < 10 {
		t.Fatalf("checked only %d links", checked)
	}
}

// hasAnchor: GitHub's anchor of a heading: lower case, spaces to '-',
// punctuation other than '-' and '_' dropped.
func hasAnchor(doc, anchor string) bool {
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(l, "#") {
			continue
		}
		h := strings.ToLower(strings.TrimSpace(strings.TrimLeft(l, "#")))
		var b strings.Builder
		for _, r := range h {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r > 127 && r != '—':
				b.WriteRune(r)
			}
		}
		if b.String() == anchor {
			return true
		}
	}
	return false
}
