package watch

import (
	"bytes"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/internal/testgit"
	"github.com/patcheval/patcheval/pipelines/runner"
)

// TestHistoryShowsWhatEachTagCompiled: a watch's history carries, per
// re-tested tag, what its kernel build compiled and what the compiler
// cache answered (the point release's incremental ratio), and a tag whose
// kernel came from the build cache compiled nothing; `watch show` says so.
func TestHistoryShowsWhatEachTagCompiled(t *testing.T) {
	f := newFixture(t)
	f.w.Tags = "v7.2.*"
	f.ev.builds = map[string]string{
		"v7.2.6":  `{"key":"a","objects":357,"compiled":342,"reused":15,"seconds":1380}`,
		"v7.2.9":  `{"key":"b","objects":357,"compiled":40,"reused":317,"seconds":300}`,
		"v7.2.11": `{"key":"c","cache_hit":true}`,
	}
	testgit.Tag(t, f.up.dir, "v7.2.6", f.up.commit(t, 100))
	f.tick(t)
	testgit.Tag(t, f.up.dir, "v7.2.9", f.up.commit(t, 100))
	f.tick(t)
	testgit.Tag(t, f.up.dir, "v7.2.11", f.up.commit(t, 100))
	testgit.Tag(t, f.up.dir, "v7.2.12", f.up.commit(t, 100))
	f.tick(t)
	h, err := Load(f.st, f.w)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]*runner.CompileStats{
		"v7.2.6":  {Objects: 357, Compiled: 342, Reused: 15, Seconds: 1380},
		"v7.2.9":  {Objects: 357, Compiled: 40, Reused: 317, Seconds: 300},
		"v7.2.11": {Cached: true},
		"v7.2.12": nil, // evaluated, no build recorded
	}
	if len(h.Tags) != 4 {
		t.Fatalf("tags %d", len(h.Tags))
	}
	for _, e := range h.Tags {
		w, got := want[e.Tag], e.Build
		if (w == nil) != (got == nil) || w != nil && *w != *got {
			t.Errorf("%s: build %+v, want %+v", e.Tag, got, w)
		}
	}
	var out bytes.Buffer
	if err := WriteText(&out, h); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"  v7.2.6: 342 of 357 compiled (95.8%), 15 from the compiler cache, 1380 s\n",
		"  v7.2.9: 40 of 357 compiled (11.2%), 317 from the compiler cache, 300 s\n",
		"  v7.2.11: from the build cache, nothing compiled\n",
	} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("watch show lacks %q:\n%s", line, out.String())
		}
	}
	if strings.Contains(out.String(), "v7.2.12:") {
		t.Errorf("a tag without a build has a builds line:\n%s", out.String())
	}
}
