package bisect

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/patcheval/patcheval/internal/linuxtree"
	"github.com/patcheval/patcheval/internal/testgit"
)

// TestAdjacentReleasesSayTheHistoryGoesNoFiner: a regression between two
// point releases imported one after another (patcheval tree import: each
// release one commit) is bisected to the newer release's commit, and the
// report says that commit is a whole release and a finer answer needs the
// real history; a one-commit range of an ordinary history says only that
// bisection cannot go below it.
func TestAdjacentReleasesSayTheHistoryGoesNoFiner(t *testing.T) {
	dir := t.TempDir()
	repo := &linuxtree.Repo{Path: filepath.Join(dir, "releases.git")}
	for tag, v := range map[string]string{"v7.2.6": "1000", "v7.2.9": "1250"} {
		src, err := linuxtree.TarballSource(testgit.Tarball(t, dir, "linux-"+strings.TrimPrefix(tag, "v")+".tar.gz", time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC),
			map[string]string{"bench/getppid": v + "\n", "Makefile": "VERSION = 7\n"}), tag)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := repo.ImportSource(context.Background(), src); err != nil {
			t.Fatal(err)
		}
	}
	m := &treeMeasurer{repo: repo.Path, built: map[string]bool{}}
	// By commit ids, as a watch bisects: the note names the releases.
	good := testgit.Git(t, nil, nil, "--git-dir="+repo.Path, "rev-parse", "v7.2.6^{commit}")
	bad := testgit.Git(t, nil, nil, "--git-dir="+repo.Path, "rev-parse", "v7.2.9^{commit}")
	res, err := Run(context.Background(), Options{Repo: repo.Path, Good: good, Bad: bad, Measurer: m,
		Benchmark: "getppid", Metric: "ns/op", Deterministic: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != Found || res.Commits != 1 || res.Culprit == nil || res.Culprit.Hash != bad {
		t.Fatalf("bisection %s over %d commit(s), culprit %+v; want v7.2.9's commit %s", res.Status, res.Commits, res.Culprit, bad)
	}
	var txt bytes.Buffer
	if err := WriteText(&txt, res, Context{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"the range v7.2.6..v7.2.9 is one commit, v7.2.9 imported as a whole release (tarball linux-7.2.9.tar.gz)",
		"a finer answer needs the real history between them (e.g. the stable tree's commits from v7.2.6 to v7.2.9)"} {
		if !strings.Contains(txt.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, txt.String())
		}
	}

	// An ordinary history: one commit between good and bad.
	plain, good, last, _ := history(t, []string{"1250"})
	res, err = Run(context.Background(), Options{Repo: plain, Good: good, Bad: last, Measurer: &treeMeasurer{repo: plain, built: map[string]bool{}},
		Benchmark: "getppid", Metric: "ns/op", Deterministic: true})
	if err != nil {
		t.Fatal(err)
	}
	notes := strings.Join(res.Notes, "\n")
	if !strings.Contains(notes, "is one commit: bisection cannot go below") || strings.Contains(notes, "whole release") {
		t.Fatalf("notes of a one-commit ordinary range:\n%s", notes)
	}
}
