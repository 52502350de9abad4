package reporters

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/patcheval/patcheval/internal/testgit"
	"github.com/patcheval/patcheval/pipelines/store"
)

// fakeGitHub is an httptest server that follows GitHub's documented REST
// API for what the reporter uses (GitHub cannot be reached from here):
// commit statuses (POST /repos/{o}/{r}/statuses/{sha}, GET
// /repos/{o}/{r}/commits/{ref}/statuses, newest first; 422 "No commit
// found for SHA" for an unknown commit), pulls (GET
// /repos/{o}/{r}/pulls?head=o:branch&state=open), issue comments (GET and
// POST /repos/{o}/{r}/issues/{n}/comments), check runs (POST
// /repos/{o}/{r}/check-runs, GET /repos/{o}/{r}/commits/{ref}/check-runs;
// 403 for a token that is not a GitHub App's), 401 for a bad token, and
// 404 for a repository other than o/r (one the token cannot see), and
// the rate limits: 403 with X-RateLimit-Remaining: 0 and
// X-RateLimit-Reset (primary), 403 with Retry-After (secondary).
type fakeGitHub struct {
	*httptest.Server
	token    string
	mu       sync.Mutex
	commits  map[string]bool
	statuses map[string][]map[string]any
	prs      map[string]int // branch -> PR number
	comments map[int][]map[string]any
	checks   []map[string]any
	creates  int
	// limited answers the next requests with a rate limit: "primary" or
	// "secondary"; limitN is how many.
	limited string
	limitN  int
	// app, when set, makes installation access tokens (githubapp_test.go).
	app *fakeApp
}

func newFakeGitHub(t *testing.T, token string) *fakeGitHub {
	f := &fakeGitHub{token: token, commits: map[string]bool{}, statuses: map[string][]map[string]any{},
		prs: map[string]int{}, comments: map[int][]map[string]any{}}
	mux := http.NewServeMux()
	js := func(w http.ResponseWriter, code int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		json.NewEncoder(w).Encode(v)
	}
	mux.HandleFunc("GET /repos/{o}/{r}/commits/{ref}/statuses", func(w http.ResponseWriter, r *http.Request) {
		out := f.statuses[r.PathValue("ref")]
		if out == nil {
			out = []map[string]any{}
		}
		js(w, 200, out)
	})
	mux.HandleFunc("POST /repos/{o}/{r}/statuses/{sha}", func(w http.ResponseWriter, r *http.Request) {
		sha := r.PathValue("sha")
		var in map[string]any
		json.NewDecoder(r.Body).Decode(&in)
		if !f.commits[sha] {
			js(w, 422, map[string]any{"message": "No commit found for SHA: " + sha})
			return
		}
		switch in["state"] {
		case "pending", "success", "failure", "error":
		default:
			js(w, 422, map[string]any{"message": "Validation Failed", "errors": []any{map[string]any{"resource": "Status", "field": "state", "code": "custom"}}})
			return
		}
		f.creates++
		in["id"] = f.creates
		in["url"] = fmt.Sprintf("%s/repos/o/r/statuses/%s#%d", f.URL, sha, f.creates)
		f.statuses[sha] = append([]map[string]any{in}, f.statuses[sha]...) // newest first
		js(w, 201, in)
	})
	mux.HandleFunc("GET /repos/{o}/{r}/pulls", func(w http.ResponseWriter, r *http.Request) {
		out := []map[string]any{}
		if o, b, ok := strings.Cut(r.URL.Query().Get("head"), ":"); ok && o == r.PathValue("o") && r.URL.Query().Get("state") == "open" {
			if n := f.prs[b]; n > 0 {
				out = append(out, map[string]any{"number": n, "state": "open"})
			}
		}
		js(w, 200, out)
	})
	mux.HandleFunc("GET /repos/{o}/{r}/issues/{n}/comments", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.PathValue("n"))
		out := f.comments[n]
		if out == nil {
			out = []map[string]any{}
		}
		js(w, 200, out)
	})
	mux.HandleFunc("POST /repos/{o}/{r}/issues/{n}/comments", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.PathValue("n"))
		var in map[string]any
		json.NewDecoder(r.Body).Decode(&in)
		f.creates++
		in["id"] = f.creates
		in["html_url"] = fmt.Sprintf("%s/o/r/pull/%d#issuecomment-%d", f.URL, n, f.creates)
		f.comments[n] = append(f.comments[n], in)
		js(w, 201, in)
	})
	mux.HandleFunc("GET /repos/{o}/{r}/commits/{ref}/check-runs", func(w http.ResponseWriter, r *http.Request) {
		out := []map[string]any{}
		for _, c := range f.checks {
			if c["head_sha"] == r.PathValue("ref") && (r.URL.Query().Get("check_name") == "" || c["name"] == r.URL.Query().Get("check_name")) {
				out = append(out, c)
			}
		}
		js(w, 200, map[string]any{"total_count": len(out), "check_runs": out})
	})
	mux.HandleFunc("POST /repos/{o}/{r}/check-runs", func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "), "ghs_") { // installation tokens
			js(w, 403, map[string]any{"message": "You must authenticate via a GitHub App."})
			return
		}
		var in map[string]any
		json.NewDecoder(r.Body).Decode(&in)
		f.creates++
		in["id"] = f.creates
		f.checks = append(f.checks, in)
		js(w, 201, in)
	})
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.app != nil && r.Method == "POST" && strings.HasPrefix(r.URL.Path, "/app/installations/") {
			f.app.accessToken(w, r, js)
			return
		}
		if r.Header.Get("Authorization") != "Bearer "+f.token && !f.app.valid(r.Header.Get("Authorization")) {
			js(w, 401, map[string]any{"message": "Bad credentials"})
			return
		}
		if f.limitN > 0 {
			f.limitN--
			if f.limited == "primary" {
				w.Header().Set("X-RateLimit-Limit", "5000")
				w.Header().Set("X-RateLimit-Remaining", "0")
				w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(time.Now().Add(90*time.Second).Unix(), 10))
				js(w, 403, map[string]any{"message": "API rate limit exceeded for user ID 1."})
			} else {
				w.Header().Set("Retry-After", "120")
				js(w, 403, map[string]any{"message": "You have exceeded a secondary rate limit.",
					"documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"})
			}
			return
		}
		w.Header().Set("X-RateLimit-Limit", "5000")
		w.Header().Set("X-RateLimit-Remaining", "4999")
		w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10))
		if !strings.HasPrefix(r.URL.Path, "/repos/o/r/") {
			// GitHub answers 404 for a repository the token cannot see.
			js(w, 404, map[string]any{"message": "Not Found", "documentation_url": "https://docs.github.com/rest"})
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

// gitFixture makes a local repository with one commit and an empty bare
// mirror served by git http-backend (receive-pack on).
func gitFixture(t *testing.T) (local, sha string, mirror *testgit.Server, bare string) {
	root := t.TempDir()
	local = filepath.Join(root, "local")
	env := []string{"GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@example.org", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@example.org"}
	testgit.Git(t, nil, nil, "init", "-q", "-b", "main", local)
	os.WriteFile(filepath.Join(local, "f.c"), []byte("int x;\n"), 0o644)
	testgit.Git(t, env, nil, "-C", local, "add", ".")
	testgit.Git(t, env, nil, "-C", local, "commit", "-q", "-m", "powerpc: applied series")
	sha = testgit.Git(t, nil, nil, "-C", local, "rev-parse", "HEAD")
	srvRoot := filepath.Join(root, "srv")
	bare = filepath.Join(srvRoot, "mirror.git")
	testgit.Git(t, nil, nil, "init", "-q", "--bare", bare)
	testgit.Git(t, nil, nil, "--git-dir="+bare, "config", "http.receivepack", "true")
	return local, sha, testgit.Serve(t, srvRoot), bare
}

func githubFor(t *testing.T, f *fakeGitHub, token, gitURL string, app bool) *GitHub {
	tf := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tf, []byte(token+"\n"), 0o600)
	g, err := NewGitHub("o/r", gitURL, tf, f.URL, app)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestGitHubFakeAPIPushStatusAndPRComment(t *testing.T) {
	local, sha, mirror, bare := gitFixture(t)
	f := newFakeGitHub(t, "tok123")
	f.prs["patcheval/eval-1"] = 7
	st := openStore(t, filepath.Join(t.TempDir(), "db"))
	id := newEval(t, st)
	gh := githubFor(t, f, "tok123", mirror.URL()+"/mirror.git", false)
	ob := &Outbox{Store: st, Reporters: []Reporter{gh}}
	ctx := context.Background()
	res := GitHubResult{LocalRepo: local, Commit: sha, Branch: "patcheval/eval-1", Pipeline: "selinux-tax",
		State: StatusPending, Description: "queued", TargetURL: "http://127.0.0.1/e/1"}
	if _, err := QueueGitHub(st, id, res, false); err != nil {
		t.Fatal(err)
	}
	// The status goes first only if the push made the commit known: the
	// fake learns commits from the mirror, as GitHub does.
	ob.Flush(ctx)
	if ps, _ := st.Posts(id, "", 10); ps[len(ps)-1].Status != store.PostSent {
		t.Fatalf("push: %+v", ps[len(ps)-1])
	}
	if got := testgit.Git(t, nil, nil, "--git-dir="+bare, "rev-parse", "refs/heads/patcheval/eval-1"); got != sha {
		t.Fatalf("mirror has %q, want %s", got, sha)
	}
	f.mu.Lock()
	f.commits[sha] = true
	f.mu.Unlock()
	ps, _ := st.Posts(id, "", 10)
	var status *store.Post
	for _, p := range ps {
		if strings.HasPrefix(p.Target, "status") {
			status = p
		}
	}
	if status.Status != store.PostQueued || !strings.Contains(status.LastError, "No commit found") {
		t.Fatalf("status before GitHub knew the commit: %+v", status)
	}
	// Retried (due now with a zero backoff clock).
	ob.Now = func() time.Time { return time.Now().Add(time.Hour) }
	ob.Flush(ctx)
	res.State, res.Description, res.Markdown = StatusFailure, "kill ns/op +24.8% (CI +24.7..+25.0%)", "## patcheval\n\nregression"
	if _, err := QueueGitHub(st, id, res, false); err != nil {
		t.Fatal(err)
	}
	ob.Flush(ctx)
	// Again after a "restart": nothing twice, and a late pending is dropped.
	QueueGitHub(st, id, res, false)
	res.State = StatusPending
	QueueGitHub(st, id, res, false)
	(&Outbox{Store: st, Reporters: []Reporter{githubFor(t, f, "tok123", mirror.URL()+"/mirror.git", false)}}).Flush(ctx)
	f.mu.Lock()
	defer f.mu.Unlock()
	sts := f.statuses[sha]
	if len(sts) != 2 || sts[0]["state"] != "failure" || sts[1]["state"] != "pending" || sts[0]["context"] != "patcheval-selinux-tax" ||
		sts[0]["description"] != "kill ns/op +24.8% (CI +24.7..+25.0%)" {
		t.Errorf("statuses: %v", sts)
	}
	if cs := f.comments[7]; len(cs) != 1 || !strings.HasPrefix(cs[0]["body"].(string), "## patcheval\n\nregression") {
		t.Errorf("PR comments: %v", cs)
	}
	if len(f.checks) != 0 {
		t.Errorf("check runs without an App: %v", f.checks)
	}
}

func TestGitHubFakeAPIRateLimitsAnd401And422(t *testing.T) {
	_, sha, _, _ := gitFixture(t)
	for _, tc := range []struct {
		name, limited, token, state string
		wantStatus, wantErr         string
		wantAfter                   time.Duration
	}{
		{"primary rate limit waits for X-RateLimit-Reset", "primary", "tok", StatusSuccess, store.PostQueued, "rate limit", 80 * time.Second},
		{"secondary rate limit waits for Retry-After", "secondary", "tok", StatusSuccess, store.PostQueued, "secondary rate limit", 110 * time.Second},
		{"401 bad token fails for good", "", "s3cr3t-wrong", StatusSuccess, store.PostFailed, "401", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeGitHub(t, "tok")
			f.commits[sha] = true
			f.limited, f.limitN = tc.limited, 1
			st := openStore(t, filepath.Join(t.TempDir(), "db"))
			id := newEval(t, st)
			ob := &Outbox{Store: st, Reporters: []Reporter{githubFor(t, f, tc.token, "http://127.0.0.1:1/none.git", false)}, Backoff: time.Second}
			p, err := Enqueue(st, GitHubName, "status "+sha+" patcheval-x", id, tc.state,
				GitHubPost{Kind: "status", Commit: sha, Branch: "b", State: tc.state, Context: "patcheval-x", Description: "ok"}, false)
			if err != nil {
				t.Fatal(err)
			}
			ob.Flush(context.Background())
			p, _ = st.Post(p.ID)
			if p.Status != tc.wantStatus || !strings.Contains(p.LastError, tc.wantErr) {
				t.Fatalf("post: %+v", p)
			}
			if tc.wantAfter > 0 && time.Until(p.NextAttempt) < tc.wantAfter {
				t.Errorf("next attempt at %s, want at least %s from now", p.NextAttempt, tc.wantAfter)
			}
			if strings.Contains(p.LastError, "s3cr3t") {
				t.Errorf("token in the error: %s", p.LastError)
			}
		})
	}
	t.Run("404 (repository not visible yet) is retried", func(t *testing.T) {
		f := newFakeGitHub(t, "tok")
		st := openStore(t, filepath.Join(t.TempDir(), "db"))
		id := newEval(t, st)
		gh := githubFor(t, f, "tok", "", false)
		gh.Repo = "missing" // the fake knows no such route: GitHub's 404 {"message": "Not Found"}
		p, _ := Enqueue(st, GitHubName, "status x", id, StatusSuccess, GitHubPost{Kind: "status", Commit: sha, State: StatusSuccess, Context: "c"}, false)
		(&Outbox{Store: st, Reporters: []Reporter{gh}}).Flush(context.Background())
		if p, _ = st.Post(p.ID); p.Status != store.PostQueued || !strings.Contains(p.LastError, "404") {
			t.Fatalf("post: %+v", p)
		}
	})
	t.Run("422 invalid state fails for good", func(t *testing.T) {
		f := newFakeGitHub(t, "tok")
		f.commits[sha] = true
		st := openStore(t, filepath.Join(t.TempDir(), "db"))
		p, _ := Enqueue(st, GitHubName, "status x", 0, "", GitHubPost{Kind: "status", Commit: sha, State: "passed", Context: "c"}, false)
		(&Outbox{Store: st, Reporters: []Reporter{githubFor(t, f, "tok", "", false)}}).Flush(context.Background())
		if p, _ = st.Post(p.ID); p.Status != store.PostFailed || !strings.Contains(p.LastError, "422") {
			t.Fatalf("post: %+v", p)
		}
	})
	t.Run("check runs only as a GitHub App", func(t *testing.T) {
		f := newFakeGitHub(t, "ghs_app")
		f.commits[sha] = true
		st := openStore(t, filepath.Join(t.TempDir(), "db"))
		id := newEval(t, st)
		res := GitHubResult{LocalRepo: "/nonexistent", Commit: sha, Branch: "b", Pipeline: "p", State: StatusSuccess,
			Description: "no change", Markdown: "# ok"}
		ps, _ := QueueGitHub(st, id, res, true)
		if len(ps) != 4 || !strings.HasPrefix(ps[3].Target, "check ") {
			t.Fatalf("posts: %v", ps)
		}
		(&Outbox{Store: st, Reporters: []Reporter{githubFor(t, f, "ghs_app", "", true)}}).Flush(context.Background())
		if len(f.checks) != 1 || f.checks[0]["conclusion"] != "success" || f.checks[0]["name"] != "patcheval-p" {
			t.Errorf("check runs: %v", f.checks)
		}
		if p, _ := st.Post(ps[2].ID); p.Status != store.PostSkipped || !strings.Contains(p.LastError, "no open pull request") {
			t.Errorf("comment without a PR: %+v", p)
		}
	})
}

// A crash after GitHub took the status and the PR comment, before the
// store recorded them: the restarted outbox (a reopened store) finds
// both there (the status by its content, the comment by its marker) and
// posts nothing twice.
func TestGitHubFakeAPIRestartAfterPostPostsNothingTwice(t *testing.T) {
	_, sha, _, _ := gitFixture(t)
	f := newFakeGitHub(t, "tok")
	f.commits[sha] = true
	f.prs["b"] = 3
	path := filepath.Join(t.TempDir(), "db")
	st := openStore(t, path)
	id := newEval(t, st)
	gh := githubFor(t, f, "tok", "", false)
	ps, err := gh.Queue(st, id, GitHubResult{LocalRepo: "/nonexistent", Commit: sha, Branch: "b", Pipeline: "p",
		State: StatusFailure, Description: "kill ns/op +24.8%", Markdown: "## regression"})
	if err != nil || len(ps) != 3 {
		t.Fatalf("queue: %v %v", ps, err)
	}
	for _, p := range ps[1:] { // status and comment: what Flush does, cut short after delivery
		if ok, err := st.MarkPostSending(p.ID, ""); !ok || err != nil {
			t.Fatal(ok, err)
		}
		if _, err := gh.Deliver(context.Background(), p, false); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	st2 := openStore(t, path)
	st2.FailPost(ps[0].ID, fmt.Errorf("no push in this test"))
	if n, err := (&Outbox{Store: st2, Reporters: []Reporter{githubFor(t, f, "tok", "", false)}}).Flush(context.Background()); n != 0 || err != nil {
		t.Fatalf("flush after restart sent %d (%v)", n, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.statuses[sha]) != 1 || len(f.comments[3]) != 1 {
		t.Errorf("GitHub has %d statuses and %d comments, want 1 each", len(f.statuses[sha]), len(f.comments[3]))
	}
	for _, p := range ps[1:] {
		if q, _ := st2.Post(p.ID); q.Status != store.PostSent {
			t.Errorf("%s: %s, want sent", q.Target, q.Status)
		}
	}
}
