package service

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/internal/testenv"
	"github.com/patcheval/patcheval/internal/testinbox"
)

// testService runs a Service on a loopback port until the test ends.
func testService(t *testing.T, cfg Config) (*Service, string) {
	t.Helper()
	return testServiceOn(t, cfg, "127.0.0.1:0")
}

// testServiceOn is testService listening on addr.
func testServiceOn(t *testing.T, cfg Config, addr string) (*Service, string) {
	t.Helper()
	if cfg.Database == "" {
		cfg.Database = filepath.Join(t.TempDir(), "patcheval.db")
	}
	if cfg.Log == nil {
		cfg.Log = testWriter{t}
	}
	ctx, cancel := context.WithCancel(context.Background())
	s, err := New(ctx, cfg)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		s.Close()
	})
	return s, "http://" + ln.Addr().String()
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// call sends a request and decodes an APIError (or anything) from the
// answer.
func call(t *testing.T, method, url, token string, body any, hdr ...string) (int, APIError, []byte) {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		data, _ := json.Marshal(b)
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var e APIError
	_ = json.Unmarshal(data, &e)
	return resp.StatusCode, e, data
}

// gitRepo makes a real git repository with one commit.
func gitRepo(t *testing.T, dir string) string {
	t.Helper()
	for _, args := range [][]string{{"init", "-q", dir}, {"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-q", "--allow-empty", "-m", "init"}} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return dir
}

// backport is the bundled v6.1 backport thread.
var backport = testenv.BackportMbox()

// TestSubmitBadInput sends every kind of bad submission to a real service
// (with a real public-inbox as its lore): each gets a 4xx (502 for an
// unreachable lore) JSON error naming the field, and nothing is stored or
// queued.
func TestSubmitBadInput(t *testing.T) {
	inbox := testinbox.Start(t, backport)
	root := t.TempDir()
	allowed := gitRepo(t, filepath.Join(root, "allowed", "linux"))
	outside := gitRepo(t, filepath.Join(root, "outside"))
	// A sparse checkout: `git sparse-checkout` sets extensions.worktreeConfig,
	// which go-git's own opener refuses; the run reads it fine, so the
	// service must accept it (it then fails on the base, like allowed).
	sparse := gitRepo(t, filepath.Join(root, "allowed", "sparse"))
	if out, err := exec.Command("git", "-C", sparse, "sparse-checkout", "set", "--no-cone", "/x").CombinedOutput(); err != nil {
		t.Fatalf("git sparse-checkout: %v\n%s", err, out)
	}
	notGit := filepath.Join(root, "allowed", "plain")
	if err := os.MkdirAll(notGit, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "allowed", "escape")); err != nil {
		t.Fatal(err)
	}
	s, base := testService(t, Config{AllowTrees: []string{filepath.Join(root, "allowed")}, Lore: inbox.URL})
	_, downBase := testService(t, Config{AllowTrees: []string{filepath.Join(root, "allowed")}, Lore: closedPort(t)})
	mboxData, err := os.ReadFile(backport)
	if err != nil {
		t.Fatal(err)
	}
	const msgid = "20261102093000.4121-0-tester@example.org"
	ok := SubmitRequest{MsgID: msgid, Pipeline: "ppc-preempt-dynamic", Tree: allowed}
	with := func(f func(r *SubmitRequest)) SubmitRequest { r := ok; f(&r); return r }
	cases := []struct {
		name  string
		base  string
		body  any
		ctype string
		code  int
		field string
		want  string
	}{
		{"not JSON", base, "{msgid:", "", 400, "body", "not a JSON"},
		{"unknown field", base, `{"msgid":"a@b","pipeline":"selinux-tax","tre":"/x"}`, "", 400, "body", "unknown field"},
		{"form content type", base, "msgid=x", "application/x-www-form-urlencoded", 415, "Content-Type", "application/json"},
		{"no pipeline", base, with(func(r *SubmitRequest) { r.Pipeline = "" }), "", 400, "pipeline", "no pipeline"},
		{"unknown pipeline", base, with(func(r *SubmitRequest) { r.Pipeline = "ppc-preempt" }), "", 400, "pipeline", "unknown pipeline"},
		{"pipeline file path", base, with(func(r *SubmitRequest) { r.Pipeline = "/etc/passwd" }), "", 400, "pipeline", "unknown pipeline"},
		{"malformed msgid", base, with(func(r *SubmitRequest) { r.MsgID = "not a message id" }), "", 400, "msgid", "not a Message-ID"},
		{"msgid is a local file", base, with(func(r *SubmitRequest) { r.MsgID = "/etc/hostname" }), "", 400, "msgid", "not a Message-ID"},
		{"URL on another server", base, with(func(r *SubmitRequest) { r.MsgID = "http://127.0.0.2:9/all/" + msgid + "/" }), "", 400, "msgid", "not on this service's lore"},
		{"msgid and mbox", base, with(func(r *SubmitRequest) { r.Mbox = string(mboxData) }), "", 400, "msgid", "not both"},
		{"neither msgid nor mbox", base, with(func(r *SubmitRequest) { r.MsgID = "" }), "", 400, "msgid", "no thread"},
		{"unknown msgid", base, with(func(r *SubmitRequest) { r.MsgID = "nobody-sent-this@example.org" }), "", 400, "msgid", "nobody-sent-this@example.org"},
		{"mbox without patches", base, with(func(r *SubmitRequest) { r.MsgID, r.Mbox = "", "From x\nSubject: hi\nMessage-ID: <a@b>\n\nhello\n" }), "", 400, "mbox", ""},
		{"relative tree", base, with(func(r *SubmitRequest) { r.Tree = "linux" }), "", 400, "tree", "absolute"},
		{"tree outside the allowed", base, with(func(r *SubmitRequest) { r.Tree = outside }), "", 400, "tree", "is not a usable tree here"},
		{"tree escaping through a symlink", base, with(func(r *SubmitRequest) { r.Tree = filepath.Join(root, "allowed", "escape") }), "", 400, "tree", "is not a usable tree here"},
		{"tree with ..", base, with(func(r *SubmitRequest) { r.Tree = filepath.Join(root, "allowed", "..", "outside") }), "", 400, "tree", "is not a usable tree here"},
		{"tree not a git repository", base, with(func(r *SubmitRequest) { r.Tree = notGit }), "", 400, "tree", "not a git repository"},
		{"tree missing", base, with(func(r *SubmitRequest) { r.Tree = filepath.Join(root, "allowed", "gone") }), "", 400, "tree", "is not a usable tree here"},
		{"host path that exists, outside", base, with(func(r *SubmitRequest) { r.Tree = "/etc" }), "", 400, "tree", "is not a usable tree here"},
		{"host path that does not exist", base, with(func(r *SubmitRequest) { r.Tree = "/nonexistent-patcheval" }), "", 400, "tree", "is not a usable tree here"},
		{"base not in the tree", base, with(func(r *SubmitRequest) { r.Base = "v6.1-debian" }), "", 400, "tree", "v6.1-debian"},
		{"sparse tree accepted, base not in it", base, with(func(r *SubmitRequest) { r.Tree, r.Base = sparse, "v6.1-debian" }), "", 400, "tree", "v6.1-debian"},
		{"boots out of range", base, with(func(r *SubmitRequest) { r.Boots = 1000 }), "", 400, "boots", "1..100"},
		{"negative version", base, with(func(r *SubmitRequest) { r.Version = -1 }), "", 400, "version", "version"},
		{"per_patch without a series comparison", base, with(func(r *SubmitRequest) { r.PerPatch = true }), "", 400, "per_patch", "no comparison of a variant without the series"},
		{"version the thread lacks", base, with(func(r *SubmitRequest) { r.Version = 9 }), "", 400, "version", ""},
		{"lore unreachable", downBase, ok, "", 502, "msgid", "unreachable"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var hdr []string
			if c.ctype != "" {
				hdr = []string{"Content-Type", c.ctype}
			}
			code, e, raw := call(t, "POST", c.base+"/api/v1/evaluations", "", c.body, hdr...)
			if code != c.code || e.Field != c.field || !strings.Contains(e.Error, c.want) {
				t.Errorf("got %d %s, want %d field %q containing %q", code, raw, c.code, c.field, c.want)
			}
		})
	}
	for _, c := range []struct{ path, field string }{
		{"/api/v1/evaluations?status=finished", "status"},
		{"/api/v1/evaluations?limit=0", "limit"},
		{"/api/v1/evaluations?limit=many", "limit"},
		{"/api/v1/evaluations?offset=-1", "offset"},
		{"/api/v1/evaluations/abc", "id"},
		{"/api/v1/jobs?state=sleeping", "state"},
		{"/api/v1/jobs?evaluation=x", "evaluation"},
	} {
		if code, e, raw := call(t, "GET", base+c.path, "", nil); code != 400 || e.Field != c.field {
			t.Errorf("GET %s: %d %s, want 400 naming %q", c.path, code, raw, c.field)
		}
	}
	for _, p := range []string{"/api/v1/evaluations/99", "/api/v1/evaluations/99/report", "/api/v1/nothing"} {
		if code, _, raw := call(t, "GET", base+p, "", nil); code != 404 {
			t.Errorf("GET %s: %d %s, want 404", p, code, raw)
		}
	}
	if code, e, _ := call(t, "POST", base+"/api/v1/evaluations/99/cancel", "", ""); code != 404 || e.Field != "id" {
		t.Errorf("cancel of an unknown evaluation: %d %+v, want 404", code, e)
	}
	// Nothing was stored or queued by any of them.
	if evs, err := s.Store().ListEvaluations(); err != nil || len(evs) != 0 {
		t.Errorf("bad submissions stored %d evaluation(s) (%v)", len(evs), err)
	}
	if jobs, err := s.Engine().Jobs(context.Background(), 0, 10); err != nil || len(jobs) != 0 {
		t.Errorf("bad submissions queued %d job(s) (%v)", len(jobs), err)
	}
}

// closedPort is a loopback URL nothing listens on.
func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

// TestToken: with a token (what a non-loopback --listen requires), a POST
// without it, or with a wrong one, is 401 before anything is read; the
// right Bearer token gets through; reads need it too unless PublicRead;
// a cross-site form post is refused even on loopback without a token.
func TestToken(t *testing.T) {
	const tok = "0123456789abcdef-test-token"
	_, base := testService(t, Config{Token: []byte(tok)})
	body := SubmitRequest{MsgID: "a@b", Pipeline: "nope"}
	for _, c := range []struct {
		name, method, path, token string
		hdr                       []string
		code                      int
	}{
		{"POST without a token", "POST", "/api/v1/evaluations", "", nil, 401},
		{"POST with a wrong token", "POST", "/api/v1/evaluations", tok + "x", nil, 401},
		{"POST with a prefix of the token", "POST", "/api/v1/evaluations", tok[:10], nil, 401},
		{"POST with Basic and a wrong password", "POST", "/api/v1/evaluations", "", []string{"Authorization", "Basic dTp3cm9uZw=="}, 401},
		{"cancel without a token", "POST", "/api/v1/evaluations/1/cancel", "", nil, 401},
		{"dashboard button without a token", "POST", "/evaluations/1/rerun", "", nil, 401},
		{"POST with the token", "POST", "/api/v1/evaluations", tok, nil, 400},
		{"GET without a token", "GET", "/api/v1/evaluations", "", nil, 401},
		{"page without a token", "GET", "/", "", nil, 401},
		{"GET with the token", "GET", "/api/v1/evaluations", tok, nil, 200},
	} {
		var b any
		if c.method == "POST" {
			b = body
		}
		code, e, raw := call(t, c.method, base+c.path, c.token, b, c.hdr...)
		if code != c.code {
			t.Errorf("%s: %d %s, want %d", c.name, code, raw, c.code)
		}
		if code == 401 && (e.Field != "Authorization" || strings.Contains(string(raw), tok)) {
			t.Errorf("%s: 401 body %s should name Authorization and never echo the token", c.name, raw)
		}
	}
	_, pub := testService(t, Config{Token: []byte(tok), PublicRead: true})
	if code, _, _ := call(t, "GET", pub+"/", "", nil); code != 200 {
		t.Errorf("PublicRead: GET / = %d, want 200", code)
	}
	if code, _, _ := call(t, "POST", pub+"/api/v1/evaluations", "", body); code != 401 {
		t.Errorf("PublicRead: POST without a token = %d, want 401", code)
	}
	_, open := testService(t, Config{})
	if code, e, _ := call(t, "POST", open+"/api/v1/evaluations", "", body, "Origin", "http://evil.example"); code != 403 || e.Field != "Origin" {
		t.Errorf("cross-site POST on a token-less loopback service = %d %+v, want 403", code, e)
	}
	if code, _, _ := call(t, "POST", open+"/api/v1/evaluations", "", body, "Sec-Fetch-Site", "cross-site"); code != 403 {
		t.Errorf("cross-site (Sec-Fetch-Site) POST = %d, want 403", code)
	}
}

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true, "127.3.4.5:1": true, "[::1]:80": true, "localhost:80": true,
		":8080": false, "0.0.0.0:8080": false, "[::]:80": false, "192.168.1.2:80": false, "example.org:80": false, "garbage": false,
	} {
		if got := IsLoopback(addr); got != want {
			t.Errorf("IsLoopback(%q) = %v, want %v", addr, got, want)
		}
	}
}

// TestDashboardEmpty renders the pages of an empty service, then refuses
// to cancel a finished evaluation.
func TestDashboardEmpty(t *testing.T) {
	s, base := testService(t, Config{})
	for _, p := range []string{"/", "/queue", "/?status=done&page=2"} {
		resp, err := http.Get(base + p)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), "</html>") {
			t.Errorf("GET %s: %d\n%s", p, resp.StatusCode, b)
		}
	}
	ids := recordEvaluations(t, s, 1, 1)
	if code, e, raw := call(t, "POST", base+"/api/v1/evaluations/"+itoa(ids[0])+"/cancel", "", ""); code != 409 || e.Field != "id" || !strings.Contains(e.Error, "done") {
		t.Errorf("cancel of a finished evaluation: %d %s, want 409", code, raw)
	}
	if code, _, raw := call(t, "POST", base+"/evaluations/"+itoa(ids[0])+"/cancel", "", ""); code != 409 {
		t.Errorf("dashboard cancel of a finished evaluation: %d %s, want 409", code, raw)
	}
	resp, err := http.Get(base + "/evaluations/7")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("GET /evaluations/7 = %d, want 404", resp.StatusCode)
	}
}

// A service stopped while its jobs are still starting (its context
// cancelled before the orphaned-jobs query runs) stops without an error:
// the query cut short is the stop, not a database failure. It used to
// return "orphaned jobs: context canceled", which failed short tests
// whose clean-up stopped the service early under load.
func TestRunStoppedWhileStarting(t *testing.T) {
	cfg := Config{Database: filepath.Join(t.TempDir(), "patcheval.db"), Log: testWriter{t}}
	s, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Run(ctx, nil); err != nil {
		t.Errorf("Run stopped before its jobs started: %v, want nil", err)
	}
}
