package service

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/internal/testgit"
	"github.com/patcheval/patcheval/pipelines/store"
)

// TestWorkerFetchesSourcesFromServe: serve lends an evaluation's tree over
// git's smart HTTP (the real git http-backend) and a worker's mirror
// fetches from it the commits its builds need, by hash: one that is on
// no branch too, and only with the token. A commit the mirror holds is
// found without the server. Pushes and git's dumb protocol are refused.
func TestWorkerFetchesSourcesFromServe(t *testing.T) {
	tok := []byte("farm-token-0123456789")
	s, base := testService(t, Config{Token: tok})
	tree := testgit.InitBare(t, filepath.Join(t.TempDir(), "linux.git"))
	c1 := testgit.Commit(t, tree, "", "base", "2026-11-02T10:00:00Z", map[string]string{"Makefile": "all:\n", "kernel/a.c": "int a;\n"})
	testgit.Git(t, nil, nil, "--git-dir="+tree, "update-ref", "refs/heads/master", c1)
	// The applied series: a commit no ref names (its branch moved on).
	c2 := testgit.Commit(t, tree, c1, "series", "2026-11-02T10:01:00Z", map[string]string{"kernel/a.c": "int a = 2;\n"})
	e, _, err := s.Store().CreateOrResumeEvaluation("sources", store.EvaluationMeta{Pipeline: "p", Tree: tree, Base: c1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cache := t.TempDir()
	m := &mirrors{dir: filepath.Join(cache, "trees", "farm"), server: base, token: tok}

	anon := &mirrors{dir: filepath.Join(t.TempDir(), "anon"), server: base}
	if _, err := anon.sources(ctx, e.ID, tree, c1); err == nil {
		t.Errorf("a fetch without the token was served")
	}
	for _, c := range []string{c1, c2} {
		repo, err := m.sources(ctx, e.ID, tree, c)
		if err != nil {
			t.Fatalf("fetching %s: %v", c, err)
		}
		if !strings.HasPrefix(repo, m.dir) || !has(repo, c) {
			t.Fatalf("mirror %s lacks %s", repo, c)
		}
		if got, err := testgit.Blob(repo, c, "kernel/a.c"); err != nil || got == "" {
			t.Errorf("kernel/a.c at %s in the mirror: %q %v", c, got, err)
		}
	}
	// Held: no request (the server address is unreachable).
	off := &mirrors{dir: m.dir, server: "http://127.0.0.1:1", token: tok}
	if _, err := off.sources(ctx, e.ID, tree, c2); err != nil {
		t.Errorf("a commit the mirror holds needed the server: %v", err)
	}
	if _, err := m.sources(ctx, e.ID, tree, "not-a-hash"); err == nil || !strings.Contains(err.Error(), "full hash") {
		t.Errorf("a bad commit: %v", err)
	}
	if _, err := m.sources(ctx, e.ID+100, tree, strings.Repeat("a", 40)); err == nil {
		t.Errorf("a fetch from an evaluation that does not exist worked")
	}

	// A push, with the token, is refused; the tree is unchanged.
	work := t.TempDir()
	testgit.Git(t, nil, nil, "clone", "-q", tree, work+"/w")
	url := strings.Replace(base, "http://", "http://x:"+string(tok)+"@", 1) + GitPath + itoa(e.ID)
	if _, err := testgit.Run(nil, nil, "-C", work+"/w", "push", url, c1+":refs/heads/pushed"); err == nil {
		t.Errorf("a push to serve's tree endpoint was taken")
	}
	if _, err := testgit.Run(nil, nil, "--git-dir="+tree, "rev-parse", "--verify", "refs/heads/pushed"); err == nil {
		t.Errorf("the push created a branch in the coordinator's tree")
	}
	for _, p := range []string{"/info/refs?service=git-receive-pack", "/HEAD", "/objects/info/packs"} {
		req, _ := http.NewRequest("GET", base+GitPath+itoa(e.ID)+p, nil)
		req.Header.Set("Authorization", "Bearer "+string(tok))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %s, want refused", p, resp.Status)
		}
	}
}
