package service

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/pipelines/store"
)

// TestFailedEvaluationSaysWhy: a failed evaluation's page opens with its
// first failing stage and reason, the index shows the same line, and a
// series that never applied is offered no reproducer.
func TestFailedEvaluationSaysWhy(t *testing.T) {
	s, base := testService(t, Config{})
	st := s.Store()
	mk := func(key, title string) int64 {
		e, _, err := st.CreateOrResumeEvaluation(store.Key("why", key), store.EvaluationMeta{Pipeline: "default", SeriesTitle: title, Tree: "/srv/linux.git", Base: "830b3c68c1fb"})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.SetEvaluationStatus(e.ID, store.StatusFailed); err != nil {
			t.Fatal(err)
		}
		return e.ID
	}
	build := mk("build", "build breaks")
	for _, b := range []store.Build{
		{Variant: "base", Arch: "x86_64", Status: "ok"},
		{Variant: "patched", Arch: "x86_64", Status: "failed", ErrorKind: "kernel",
			ErrorText: "\nkernel/sched/core.c:123:5: error: 'foo' undeclared\n--- log tail ---\nmake: *** [Makefile:1] Error 1"},
	} {
		if _, err := st.RecordBuild(build, b); err != nil {
			t.Fatal(err)
		}
	}
	apply := mk("apply", "does not apply")
	if err := st.RecordApplyFailure(store.ApplyFailure{EvaluationID: apply, Patch: 2, Total: 3, Label: "2/3 lib: x", File: "lib/x.c", Hunk: 1,
		HunkHeader: "@@ -7,7 +7,7 @@", Reason: "hunk #1 does not apply", ErrorKind: "failed", Base: "830b3c68c1fb", BaseSubject: "Linux 6.1"}); err != nil {
		t.Fatal(err)
	}
	get := func(p string) string {
		t.Helper()
		resp, err := http.Get(base + p)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	page := get("/evaluations/" + itoa(build))
	if !strings.Contains(page, `id="why"`) || !strings.Contains(page, "Failed at build patched/x86_64:</b> kernel/sched/core.c:123:5: error: &#39;foo&#39; undeclared") {
		t.Errorf("build failure page: no headline naming the build and its first error line\n%s", page)
	}
	page = get("/evaluations/" + itoa(apply))
	if !strings.Contains(page, "Failed at apply:</b> patch 2/3") || strings.Contains(page, "repro.tar.gz") {
		t.Errorf("apply failure page: want the apply headline and no repro.tar.gz\n%s", page)
	}
	index := get("/")
	for _, want := range []string{"build patched/x86_64: kernel/sched/core.c:123:5", "apply: patch 2/3"} {
		if !strings.Contains(strings.ReplaceAll(index, "&#39;", "'"), want) {
			t.Errorf("index lacks %q", want)
		}
	}
}
