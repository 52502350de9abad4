package service

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/patcheval/patcheval/internal/testenv"
	"github.com/patcheval/patcheval/pipelines/store"
)

// TestFarmTreeFetchBench is bench/farm-build.sh --fetch: a worker's first
// fetch of a whole kernel tree (the imported 6.1 tree,
// testenv.LinuxTree) into its empty mirror over serve's GitPath
// (mirrors.sources: go-git, the one commit a build needs, by hash), and,
// for reference, C git on the same URL: `git clone --bare` and `git
// fetch` of the same commit into an empty repository. serve runs in this
// process on loopback, with a token as on a farm; git http-backend does
// the server's side for all three. It prints a BENCH line for each: wall
// time, the client's CPU time and what landed on disk.
//
// The client's CPU is this process's for the go-git fetch (it includes
// serve's handler, a pipe copy), and the git child's (with its
// index-pack) for the others; git http-backend's upload-pack is a child
// of serve in every case and is counted apart.
func TestFarmTreeFetchBench(t *testing.T) {
	if os.Getenv("PATCHEVAL_FARM_FETCH_BENCH") == "" {
		t.Skip("a benchmark: bench/farm-build.sh --fetch (PATCHEVAL_FARM_FETCH_BENCH=1)")
	}
	repo := testenv.LinuxTree(t)
	out, err := exec.Command("git", "--git-dir="+repo, "rev-parse", testenv.BaseCommit+"^{commit}").Output()
	if err != nil {
		t.Fatal(err)
	}
	commit := strings.TrimSpace(string(out))
	tok := []byte("farm-fetch-bench-token-0123456789")
	s, base := testService(t, Config{Token: tok, CacheDir: t.TempDir()})
	e, _, err := s.Store().CreateOrResumeEvaluation("fetch-bench", store.EvaluationMeta{Pipeline: "p", SeriesTitle: "tree fetch bench", Tree: repo})
	if err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("%s%s%d", base, GitPath, e.ID)
	dir := t.TempDir()
	t.Logf("tree %s (%s on disk), commit %s, served at %s", repo, mib(du(t, repo)), commit, url)

	self := func() time.Duration {
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	children := func() time.Duration {
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	report := func(what, path string, wall, client, server time.Duration) {
		fmt.Printf("BENCH farm-fetch: %-44s %7.1f s wall, client CPU %6.1f s, upload-pack CPU %5.1f s, %s on disk\n",
			what, wall.Seconds(), client.Seconds(), server.Seconds(), mib(du(t, path)))
	}

	// The worker's mirror (go-git), as a build's sources.
	m := &mirrors{dir: filepath.Join(dir, "mirror"), server: base, token: tok}
	c0, s0, t0 := self(), children(), time.Now()
	got, err := m.sources(context.Background(), e.ID, repo, commit)
	wall, client, server := time.Since(t0), self()-c0, children()-s0
	if err != nil {
		t.Fatal(err)
	}
	if !has(got, commit) {
		t.Fatalf("the mirror %s lacks %s after the fetch", got, commit)
	}
	report("worker mirror (go-git fetch of one commit)", got, wall, client, server)

	// C git on the same URL.
	auth := "http.extraHeader=Authorization: Bearer " + string(tok)
	run := func(what, path string, args ...string) {
		t.Helper()
		s0, t0 := children(), time.Now()
		cmd := exec.Command("git", append([]string{"-c", auth}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		wall, all := time.Since(t0), children()-s0
		client := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		report(what, path, wall, client, all-client)
	}
	clone := filepath.Join(dir, "clone.git")
	run("git clone --bare (C git, every ref)", clone, "clone", "--bare", "--quiet", url, clone)
	fetch := filepath.Join(dir, "fetch.git")
	if out, err := exec.Command("git", "init", "--bare", "--quiet", fetch).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	run("git fetch of the commit (C git)", fetch, "--git-dir="+fetch, "fetch", "--quiet", "--no-tags", url, commit)
}

// du is the bytes of the files under path.
func du(t *testing.T, path string) int64 {
	var n int64
	filepath.WalkDir(path, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

func mib(n int64) string { return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20)) }
