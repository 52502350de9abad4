package b4check_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/internal/debian"
	"github.com/patcheval/patcheval/internal/testenv"
	"github.com/patcheval/patcheval/internal/xdg"
	"github.com/patcheval/patcheval/pipelines/service"
)

// b4Packages are the Debian packages of the real b4 the test drives:
// b4 0.16.0 (sid; bookworm has 0.12, before `b4 review`) and liblore,
// which b4 0.16 imports and bookworm does not have. Its other imports
// (requests, dkim, patatt, dnspython) are bookworm's, installed with
// bookworm's b4 by .ci/install-deps.
var b4Packages = [][2]string{{"b4", "0.16.0-1"}, {"python3-liblore", "0.8.2-2"}}

// realB4 unpacks b4Packages (fetched through a private apt state on the
// machine's mirror, checked against the index's SHA256) and returns the
// directory to put on PYTHONPATH.
func realB4(t *testing.T) string {
	t.Helper()
	testenv.SkipIfSlow(t, "Debian's mirror (b4 0.16 from sid)")
	if _, err := exec.LookPath("/usr/bin/python3"); err != nil {
		t.Fatal("b4 needs Debian's python3: run .ci/install-deps")
	}
	cache := xdg.CacheDir()
	a := debian.Shared(cache, "amd64", testWriter{t})
	root := t.TempDir()
	for _, pv := range b4Packages {
		p, err := a.Find(context.Background(), pv[0], pv[1])
		if err != nil {
			t.Fatal(err)
		}
		deb, err := a.Download(context.Background(), p, debian.DebsDir(cache))
		if err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("dpkg-deb", "-x", deb, root).CombinedOutput(); err != nil {
			t.Fatalf("dpkg-deb -x %s: %v\n%s", deb, err, out)
		}
	}
	return filepath.Join(root, "usr", "lib", "python3", "dist-packages")
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// buildPatcheval builds the patcheval command into a temporary directory.
func buildPatcheval(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "patcheval")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/patcheval")
	cmd.Dir = testenv.ModuleRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

type b4Run struct {
	Version     string                         `json:"version"`
	SeriesCmds  []string                       `json:"series_cmds"`
	PerPatchCmd []string                       `json:"perpatch_cmds"`
	Series      map[string][]map[string]string `json:"series"`
	PerPatch    map[string][]map[string]string `json:"perpatch"`
	Cached      map[string][]map[string]string `json:"cached"`
}

// TestRealB4ReviewChecks drives the real b4 0.16 (Debian sid's package)
// through its own CI check machinery, b4.review.checks, the code `b4
// review tui`'s check key runs: the commands come from the enrolled
// repository's git config (b4.review-series-check-cmd and
// b4.review-perpatch-check-cmd set to `patcheval b4-check` against a
// real serve), b4 feeds them the cover letter and each patch on stdin
// with B4_TRACKING_FILE set, parses their JSON and caches the results in
// its ci.sqlite3. b4 must show patcheval's verdicts as patcheval gave
// them: fail for the regressing series, pass for the equivalent one,
// warn for the running one, nothing for its patches (no per-patch
// results); never b4's "exited with error code" or "invalid JSON output"
// failure, also when the server is down.
//
// What it does not drive: the TUI itself (its series list and results
// screen need python3-textual newer than bookworm's 0.1.13).
func TestRealB4ReviewChecks(t *testing.T) {
	pythonPath := realB4(t)
	bin := buildPatcheval(t)
	s, base := serve(t, service.Config{})
	record(t, s, "regress@example.org", "done", 15, nil)
	record(t, s, "same@example.org", "done", 0, nil)
	record(t, s, "running@example.org", "running", 0, nil)

	home := t.TempDir()
	repo := filepath.Join(home, "linux")
	env := append(os.Environ(), "HOME="+home, "XDG_DATA_HOME="+filepath.Join(home, "data"),
		"XDG_CONFIG_HOME="+filepath.Join(home, "config"), "GIT_CONFIG_NOSYSTEM=1", "PYTHONPATH="+pythonPath,
		"PATCHEVAL_SERVER=", "PATCHEVAL_TOKEN_FILE=")
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q", repo)
	msgs := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(msgs, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tracking := write("tracking.json", []byte(`{"series": {"change-id": "20261201-dynpreempt", "base-commit": "0123456789abcdef0123456789abcdef01234567",
		"first-patch-commit": "", "revision": 4, "subject": "powerpc: Enable dynamic preemption"}, "patches": []}`))

	run := func(server, msgid string) *b4Run {
		t.Helper()
		// The check commands as a maintainer configures them (shell-split by b4).
		git("-C", repo, "config", "b4.review-series-check-cmd", bin+" b4-check --report-only --server "+server)
		git("-C", repo, "config", "b4.review-perpatch-check-cmd", bin+" b4-check --report-only --server "+server)
		p1 := write(msgid+"-1.eml", patch("p1-"+msgid, msgid, "[PATCH v4 1/2] powerpc: static calls"))
		p2 := write(msgid+"-2.eml", patch("p2-"+msgid, msgid, "[PATCH v4 2/2] powerpc: Enable dynamic preemption"))
		cmd := exec.Command("/usr/bin/python3", filepath.Join(testenv.ModuleRoot(), "pipelines", "bots", "b4check", "testdata", "b4_review_checks.py"),
			tracking, write(msgid+"-0.eml", cover(msgid)), p1, p2)
		cmd.Dir, cmd.Env = repo, env
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("b4: %v\n%s", err, stderr.String())
		}
		var r b4Run
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatalf("b4's output: %v\n%s", err, out)
		}
		if r.Version != "0.16.0" || len(r.SeriesCmds) != 1 || len(r.PerPatchCmd) != 1 {
			t.Fatalf("b4 %s, commands %q %q", r.Version, r.SeriesCmds, r.PerPatchCmd)
		}
		return &r
	}
	for _, c := range []struct{ msgid, status, summary string }{
		{"regress@example.org", "fail", "1 significant regression(s) of 1 comparisons; worst kill ns/op voluntary -> voluntary+dyn +15.0%"},
		{"same@example.org", "pass", "1 comparisons: 1 equivalent"},
		{"running@example.org", "warn", "running: 4/6 boots"},
	} {
		r := run(base, c.msgid)
		got := r.Series[c.msgid]
		if len(got) != 1 || got[0]["tool"] != "patcheval" || got[0]["status"] != c.status || !strings.Contains(got[0]["summary"], c.summary) ||
			!strings.HasPrefix(got[0]["url"], base+"/evaluations/") {
			t.Errorf("%s: b4 shows %+v, want patcheval %s %q", c.msgid, got, c.status, c.summary)
		}
		for mid, res := range r.PerPatch {
			if len(res) != 0 {
				t.Errorf("%s: patch %s: b4 shows %+v, want nothing (no per-patch results)", c.msgid, mid, res)
			}
		}
		if cached := r.Cached[c.msgid]; len(cached) != 1 || cached[0]["status"] != c.status {
			t.Errorf("%s: b4's cache holds %+v", c.msgid, cached)
		}
	}
	// The server down: a warning b4 shows as patcheval's, not a failed command.
	r := run("http://127.0.0.1:1", "regress@example.org")
	if got := r.Series["regress@example.org"]; len(got) != 1 || got[0]["tool"] != "patcheval" || got[0]["status"] != "warn" ||
		!strings.Contains(got[0]["summary"], "unreachable") {
		t.Errorf("server down: b4 shows %+v", got)
	}
}
