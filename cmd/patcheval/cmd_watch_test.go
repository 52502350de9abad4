package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/internal/testgit"
	"github.com/patcheval/patcheval/pipelines/store"
)

func TestWatchCommands(t *testing.T) {
	state, cfg := t.TempDir(), t.TempDir()
	t.Setenv("PATCHEVAL_STATE_DIR", state)
	t.Setenv("PATCHEVAL_CONFIG_DIR", cfg)
	tree := t.TempDir()

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"watch", "add", "--remote", "https://git.example/linux.git", "--tags", "v6.*", "--pipeline", "selinux-tax", "--tree", tree, "--schedule", "TZ=UTC"}, "no schedule follows"},
		{[]string{"watch", "add", "--remote", "https://git.example/linux.git", "--tags", "v6.*", "--pipeline", "selinux-tax", "--tree", tree, "--schedule", "0 0 3 * * *"}, "seconds are not supported"},
		{[]string{"watch", "add", "--remote", "https://git.example/linux.git", "--tags", "v6.[", "--pipeline", "selinux-tax", "--tree", tree}, "tag pattern"},
		{[]string{"watch", "add", "--remote", "https://git.example/linux.git", "--tags", "v6.*", "--pipeline", "no-such", "--tree", tree}, "no-such"},
		{[]string{"watch", "add", "--remote", "https://git.example/linux.git", "--tags", "v6.*", "--pipeline", "selinux-tax"}, "--tree"},
		{[]string{"watch", "list", "--remote", "x"}, "only go with 'watch add'"},
		{[]string{"watch", "show", "nope"}, `no watch "nope"`},
		{[]string{"watch", "frobnicate"}, "unknown subcommand"},
	} {
		_, errOut, code := runsCLI(t, tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.want) || strings.Contains(errOut, "panic") {
			t.Errorf("%q: exit %d, %q; want exit 2 saying %q", tc.args, code, errOut, tc.want)
		}
	}

	out, errOut, code := runsCLI(t, "watch", "add", "--remote", "https://git.example/linux.git", "--tags", "v6.*-rc*",
		"--pipeline", "selinux-tax", "--tree", tree, "--schedule", "@every 30m", "--bisect")
	if code != 0 || !strings.Contains(out, "added watch linux-v6.x-rcx") {
		t.Fatalf("add: %d %q %q", code, out, errOut)
	}
	if _, errOut, code := runsCLI(t, "watch", "add", "--remote", "https://git.example/linux.git", "--tags", "v6.*-rc*",
		"--pipeline", "selinux-tax", "--tree", tree); code != 2 || !strings.Contains(errOut, "exists already") {
		t.Fatalf("duplicate add: %d %q", code, errOut)
	}
	// A [[watch]] in config.toml joins on the next command.
	conf := "[smtp]\nhost = \"x\"\n\n[[watch]]\nname = \"stable\"\nremote = \"https://git.example/stable.git\"\ntags = \"v6.1.*\"\npipeline = \"selinux-tax\"\ntree = \"" + tree + "\"\n"
	if err := os.WriteFile(filepath.Join(cfg, "config.toml"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = runsCLI(t, "watch", "list", "--json")
	var ws []store.Watch
	if code != 0 || json.Unmarshal([]byte(out), &ws) != nil || len(ws) != 2 || ws[1].Name != "stable" || ws[1].Origin != "config" ||
		ws[1].Schedule != "@every 30m" || !ws[0].Bisect {
		t.Fatalf("list: %d %q %q", code, out, errOut)
	}
	out, _, code = runsCLI(t, "watch", "show", "stable")
	if code != 0 || !strings.Contains(out, "never checked") {
		t.Fatalf("show: %d %q", code, out)
	}
	// run-now goes through the watch jobs, here worked in this process
	// (no serve has the database): the tick job finds the remote down,
	// an infra error (exit 3) that the watch shows.
	if _, errOut, code := runsCLI(t, "watch", "add", "--name", "down", "--remote", "http://127.0.0.1:1/linux.git", "--tags", "v6.*",
		"--pipeline", "selinux-tax", "--tree", tree); code != 0 {
		t.Fatalf("add down: %d %q", code, errOut)
	}
	out, errOut, code = runsCLI(t, "watch", "run-now", "--json", "down")
	var run struct {
		TickJob int64 `json:"tick_job"`
		Served  bool  `json:"served"`
	}
	if code != 3 || json.Unmarshal([]byte(out), &run) != nil || run.TickJob == 0 || run.Served || !strings.Contains(errOut, "127.0.0.1:1") {
		t.Fatalf("run-now with the remote down: exit %d, %q %q; want exit 3 after a tick job worked here", code, out, errOut)
	}
	if out, _, code := runsCLI(t, "watch", "list"); code != 0 || !strings.Contains(out, "infrastructure error: listing remote http://127.0.0.1:1") {
		t.Fatalf("list after run-now: %d %q", code, out)
	}
	// A bad [[watch]] is a clear error naming the file and the table.
	if err := os.WriteFile(filepath.Join(cfg, "config.toml"), []byte(conf+"\n[[watch]]\nremote = \"https://x/y.git\"\ntags = \"v*\"\npipeline = \"selinux-tax\"\ntree = \""+tree+"\"\nschedule = \"CRON_TZ=UTC\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := runsCLI(t, "watch", "list"); code != 2 || !strings.Contains(errOut, "config.toml: [[watch]] #2") || !strings.Contains(errOut, "CRON_TZ=UTC") {
		t.Fatalf("bad config: %d %q", code, errOut)
	}
	os.Remove(filepath.Join(cfg, "config.toml"))
	if out, _, code := runsCLI(t, "watch", "rm", "linux-v6.x-rcx"); code != 0 || !strings.Contains(out, "removed") {
		t.Fatalf("rm: %d %q", code, out)
	}
}

// TestBisectCommandInputs: flags are checked before anything is built, and
// a range whose good end does not build (here: a tree with no kernel in
// it) is a clear bad-input error, through the real measurer.
func TestBisectCommandInputs(t *testing.T) {
	t.Setenv("PATCHEVAL_STATE_DIR", t.TempDir())
	t.Setenv("PATCHEVAL_CACHE_DIR", t.TempDir())
	repo := testgit.InitBare(t, filepath.Join(t.TempDir(), "r.git"))
	c0 := testgit.Commit(t, repo, "", "base", "2026-11-02T09:00:00Z", map[string]string{"README": "x\n"})
	c1 := testgit.Commit(t, repo, c0, "change", "2026-11-02T10:00:00Z", map[string]string{"README": "y\n"})
	pipeline, _ := filepath.Abs("../../pipelines/experiments/watch/testdata/retest-x86-getppid.toml")
	out := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bisect", "--tree", repo}, "missing --bad, --good, --pipeline"},
		{[]string{"bisect", "--tree", repo, "--good", c0, "--bad", c1, "--pipeline", pipeline, "--benchmark", "fork"}, `no benchmark "fork"`},
		{[]string{"bisect", "--tree", repo, "--good", c0, "--bad", c1, "--pipeline", pipeline, "--variant", "x"}, `no variant "x"`},
		{[]string{"bisect", "--tree", repo, "--good", "v9", "--bad", c1, "--pipeline", pipeline, "--out", out}, `good revision "v9" not found`},
		{[]string{"bisect", "--tree", repo, "--good", c1, "--bad", c0, "--pipeline", pipeline, "--out", out}, "not a first-parent ancestor"},
		{[]string{"bisect", "--tree", repo, "--good", c0, "--bad", c1, "--pipeline", pipeline, "--out", out}, "the good end " + c0 + " does not build or boot"},
	} {
		_, errOut, code := runsCLI(t, tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%q: exit %d, %q; want exit 2 saying %q", tc.args[1:], code, errOut, tc.want)
		}
	}
}
