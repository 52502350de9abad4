package service

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	git "github.com/go-git/go-git/v5"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/gittree"
)

// Kernel sources for the farm: serve lends each evaluation's tree over
// git's smart HTTP protocol (git http-backend behind net/http/cgi, fetch
// only), and a worker keeps one bare mirror per coordinator tree in its
// cache and fetches into it the one commit a build needs, by hash, when
// it lacks it. No shared filesystem.

// GitPath is where serve mounts the evaluations' trees:
// GitPath+"<evaluation id>" is a git URL of evaluation id's tree (its
// base and applied commits, fetchable by hash).
const GitPath = "/git/"

// gitBackend is git http-backend's path ("" with an error when git is not
// installed), found once.
var gitBackend = sync.OnceValues(func() (string, error) {
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		return "", fmt.Errorf("git --exec-path: %v (apt-get install git)", err)
	}
	p := filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("git http-backend: %v (apt-get install git)", err)
	}
	return p, nil
})

// gitHandler serves GitPath<id>/info/refs?service=git-upload-pack and
// GitPath<id>/git-upload-pack for evaluation id's tree: clone and fetch
// only. Pushes (git-receive-pack) are refused whoever asks, and so is
// git's dumb protocol (plain file reads of the repository). Any commit of
// the tree may be fetched by hash (uploadpack.allowAnySHA1InWant): an
// applied series is a branch head only until the next evaluation moves
// the branch. The fetch's POST counts as a write for the token check
// (Service.auth), so a worker sends the token.
func (s *Service) gitHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rest := strings.TrimPrefix(r.URL.Path, GitPath)
		idText, op, _ := strings.Cut(rest, "/")
		id, err := strconv.ParseInt(idText, 10, 64)
		if err != nil || id <= 0 {
			apiError(w, http.StatusNotFound, "path", fmt.Sprintf("%s: want %s<evaluation id>/...", r.URL.Path, GitPath))
			return
		}
		switch {
		case op == "info/refs" && r.Method == http.MethodGet && r.URL.Query().Get("service") == "git-upload-pack":
		case op == "git-upload-pack" && r.Method == http.MethodPost:
		case op == "git-receive-pack" || r.URL.Query().Get("service") == "git-receive-pack":
			apiError(w, http.StatusForbidden, "path", "the coordinator's trees are read-only: pushes are refused")
			return
		default:
			apiError(w, http.StatusNotFound, "path", fmt.Sprintf("%s %s: only git's smart HTTP fetch is served (info/refs?service=git-upload-pack, git-upload-pack)", r.Method, r.URL.Path))
			return
		}
		e, err := s.db.Store.Evaluation(id)
		if err != nil {
			apiError(w, http.StatusNotFound, "path", fmt.Sprintf("evaluation %d: %v", id, err))
			return
		}
		if e.Tree == "" {
			apiError(w, http.StatusNotFound, "path", fmt.Sprintf("evaluation %d has no tree", id))
			return
		}
		backend, err := gitBackend()
		if err != nil {
			apiError(w, http.StatusServiceUnavailable, "", err.Error())
			return
		}
		h := &cgi.Handler{Path: backend, Root: GitPath + idText, Dir: e.Tree,
			Env: []string{"GIT_PROJECT_ROOT=" + e.Tree, "GIT_HTTP_EXPORT_ALL=1",
				"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_COUNT=3",
				"GIT_CONFIG_KEY_0=uploadpack.allowAnySHA1InWant", "GIT_CONFIG_VALUE_0=true",
				"GIT_CONFIG_KEY_1=http.receivepack", "GIT_CONFIG_VALUE_1=false",
				// The tree may belong to another user than serve's.
				"GIT_CONFIG_KEY_2=safe.directory", "GIT_CONFIG_VALUE_2=" + e.Tree},
			Stderr: s.log}
		h.ServeHTTP(w, r)
	})
}

// mirrors is a worker's copies of the coordinator's trees: one bare
// repository per tree under dir, fetched from serve's GitPath.
type mirrors struct {
	dir    string // <cache>/trees/farm
	server string // serve's base URL, no trailing /
	token  []byte
}

// sources is runner.Env.Sources on a worker: a local repository holding
// commit of evaluation id's tree (tree is its path on the coordinator).
// The mirror fetches the commit when it lacks it; a commit already there
// costs no request. Fetches into one mirror are serialised by a lock, so
// two builds on one worker do not fetch the same objects twice.
func (m *mirrors) sources(ctx context.Context, id int64, tree, commit string) (string, error) {
	if len(commit) != 40 || strings.Trim(commit, "0123456789abcdef") != "" {
		return "", fail.Inputf("evaluation %d: commit %q: want a full hash to fetch", id, commit)
	}
	sum := sha256.Sum256([]byte(tree))
	repo := filepath.Join(m.dir, hex.EncodeToString(sum[:8])+".git")
	if has(repo, commit) {
		return repo, nil
	}
	if err := os.MkdirAll(m.dir, 0o755); err != nil {
		return "", fail.Infra(err)
	}
	unlock, err := gittree.LockFile(ctx, repo+".lock", syscall.LOCK_EX, nil)
	if err != nil {
		return "", err
	}
	defer unlock()
	if has(repo, commit) {
		return repo, nil
	}
	if _, err := os.Stat(filepath.Join(repo, "objects")); err != nil {
		// A mirror whose creation was cut short has no objects
		// directory: made again.
		os.RemoveAll(repo)
		if _, err := git.PlainInit(repo, true); err != nil {
			return "", fail.Infraf("mirror of %s: %v", tree, err)
		}
	}
	url := fmt.Sprintf("%s%s%d", m.server, GitPath, id)
	got, err := gittree.Fetch(ctx, repo, url, commit, "refs/patcheval/"+commit, m.token)
	if err != nil {
		return "", fmt.Errorf("kernel sources of evaluation %d: %w", id, err)
	}
	if got != commit {
		return "", fail.Infraf("fetched %s from %s but got %s", commit, url, got)
	}
	return repo, nil
}

// has reports whether the repository at repo holds commit.
func has(repo, commit string) bool {
	c, err := gittree.Resolve(repo, commit+"^{commit}")
	return err == nil && c.Hash.String() == commit
}
