package build_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/patcheval/patcheval/build"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/sandbox"
	"github.com/patcheval/patcheval/internal/testgit"
)

// hostile is one attack: the top-level Makefile a series adds (run by the
// build's first make, the config target), and what must hold after.
type hostile struct {
	name, makefile string
	check          func(t *testing.T, h *hostileEnv, err error, log string)
	// infraOK: the failure may be classified as infrastructure (exit 3):
	// what the tree printed or left reads as a missing tool or output.
	infraOK bool
	// memory is the build's aggregate memory bound (0: the default).
	memory int64
}

// hostileEnv is the host an attack runs against: a token file and
// another evaluation's files it must not see, a process holding an SMTP
// password in its environment (as serve would), a base commit whose kcc
// layer holds an honest object.
type hostileEnv struct {
	cache, state, token, password, hostTmp string
	otherEval, victim                      string
	repo, base                             string
	honest                                 string // a kcc object of the base's layer
}

func randHex(t *testing.T) string {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func newHostileEnv(t *testing.T) *hostileEnv {
	dir := t.TempDir()
	h := &hostileEnv{cache: filepath.Join(dir, "cache"), state: filepath.Join(dir, "state"),
		password: "smtp-pw-" + randHex(t), hostTmp: filepath.Join(os.TempDir(), "patcheval-hostile-"+randHex(t))}
	t.Cleanup(func() { os.Remove(h.hostTmp) })
	tokenText := "token-" + randHex(t)
	h.token = filepath.Join(h.state, "token")
	h.otherEval = filepath.Join(h.cache, "builds", "other-evaluation", "build.log")
	h.victim = filepath.Join(h.state, "victim")
	for p, data := range map[string]string{h.token: tokenText + "\n", h.otherEval: "other-eval-" + randHex(t) + "\n",
		h.victim: "victim-" + randHex(t) + "\n"} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// A long-lived process with the password in its environment, like
	// serve started with PATCHEVAL_SMTP_PASSWORD.
	holder := exec.Command("sleep", "600")
	// First, so that the grep (^ on NUL-separated environ) finds it.
	holder.Env = append([]string{"PATCHEVAL_SMTP_PASSWORD=" + h.password}, os.Environ()...)
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Process.Kill(); holder.Wait() })
	t.Setenv("PATCHEVAL_SMTP_PASSWORD", h.password)

	h.repo = testgit.InitBare(t, filepath.Join(dir, "tree.git"))
	h.base = testgit.Commit(t, h.repo, "", "base", "2026-11-01T10:00:00Z",
		map[string]string{"Makefile": "%:\n\t@echo base $@\n", "README": "a tree\n"})
	// The base's kcc layer, as its build left it.
	key := strings.Repeat("ab", 32)
	h.honest = filepath.Join(h.cache, "kcc", "layers", h.base, key[:2], key+".o")
	if err := os.MkdirAll(filepath.Dir(h.honest), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(h.honest, []byte("honest object\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return h
}

// secrets are the texts no log, error or metadata may hold.
func (h *hostileEnv) secrets(t *testing.T) []string {
	tok, _ := os.ReadFile(h.token)
	other, _ := os.ReadFile(h.otherEval)
	victim, _ := os.ReadFile(h.victim)
	return []string{strings.TrimSpace(string(tok)), h.password, strings.TrimSpace(string(other)), strings.TrimSpace(string(victim))}
}

func (h *hostileEnv) expand(mk string) string {
	return strings.NewReplacer("TOKENFILE", h.token, "STATEDIR", h.state, "CACHEDIR", h.cache,
		"HOSTTMP", h.hostTmp, "OTHEREVAL", h.otherEval, "VICTIM", h.victim).Replace(mk)
}

var hostileSeries = []hostile{
	{
		// The Makefile: the token file and another process's
		// SMTP password, printed into the build error.
		name: "secrets",
		makefile: "%: ; @echo \"LEAK $$(cat TOKENFILE) $$(grep -a ^PATCHEVAL_SMTP /proc/*/environ)\" >&2; " +
			"echo \"EVAL $$(cat OTHEREVAL 2>/dev/null)\" >&2; false\n",
		check: func(t *testing.T, h *hostileEnv, err error, log string) {
			if !strings.Contains(log, "LEAK") {
				t.Errorf("the hostile Makefile did not run: log\n%s", log)
			}
		},
	},
	{
		// Writes outside its tree: the state directory, the cache, the
		// host's /tmp, and its own source tree.
		name: "write-outside",
		makefile: "%: ; @for f in STATEDIR/pwned CACHEDIR/pwned HOSTTMP $(CURDIR)/pwned; do " +
			"touch $$f 2>/dev/null && echo \"WROTE $$f\" >&2; done; false\n",
		check: func(t *testing.T, h *hostileEnv, err error, log string) {
			for _, p := range []string{filepath.Join(h.state, "pwned"), filepath.Join(h.cache, "pwned"), h.hostTmp} {
				if _, err := os.Stat(p); err == nil {
					t.Errorf("the build wrote %s", p)
				}
			}
			if strings.Contains(log, "WROTE") {
				t.Errorf("the build wrote outside its O= directory:\n%s", log)
			}
		},
	},
	{
		// Poisons kcc: overwrites the base's object (a layer it may only
		// read) and plants one in a layer of another commit.
		name: "poison-kcc",
		makefile: "%: ; @for l in $$(echo $$PATCHEVAL_KCC_READ | tr : ' '); do " +
			"for o in $$l/*/*.o; do echo evil > $$o 2>/dev/null && echo \"POISONED $$o\" >&2; done; done; " +
			"mkdir -p $$(dirname $$PATCHEVAL_KCC_DIR)/0000000000000000000000000000000000000000/ab 2>/dev/null && echo \"PLANTED\" >&2; " +
			"echo \"READ=$$PATCHEVAL_KCC_READ\" >&2; false\n",
		check: func(t *testing.T, h *hostileEnv, err error, log string) {
			if !strings.Contains(log, "READ="+filepath.Dir(filepath.Dir(h.honest))) {
				t.Errorf("the build was not offered the base's kcc layer: log\n%s", log)
			}
			if data, _ := os.ReadFile(h.honest); string(data) != "honest object\n" {
				t.Errorf("the base's kcc object was overwritten: %q", data)
			}
			if _, err := os.Stat(filepath.Join(h.cache, "kcc", "layers", strings.Repeat("0", 40))); err == nil {
				t.Errorf("the build made a kcc layer of another commit")
			}
		},
	},
	{
		// Starts processes until refused (bounded, so that the check
		// without the sandbox does not take the machine down).
		name:     "many-processes",
		makefile: "%: ; @n=0; while [ $$n -lt 400 ]; do sleep 31.4159 & echo STARTED >&2; n=$$((n+1)); done; false\n",
		check: func(t *testing.T, h *hostileEnv, err error, log string) {
			n := strings.Count(log, "STARTED")
			if n >= 64 || n == 0 {
				t.Errorf("the build started %d processes, want some and fewer than the limit (64)", n)
			}
			var left []byte
			for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
				if left, _ = exec.Command("pgrep", "-f", "^sleep 31.4159$").Output(); len(bytes.TrimSpace(left)) == 0 {
					break
				}
			}
			if len(bytes.TrimSpace(left)) > 0 {
				exec.Command("pkill", "-f", "^sleep 31.4159$").Run()
				t.Errorf("the build's processes outlived it: %s", left)
			}
		},
	},
	{
		// Leaves its .config as a link to a host file: patcheval, outside
		// the sandbox, then reads it as the configuration (into the
		// stored config) and writes the merged one back through it.
		name:     "link-out",
		makefile: "%: ; @ln -sf VICTIM $(O)/.config; true\n",
		infraOK:  true,
		check: func(t *testing.T, h *hostileEnv, err error, log string) {
			if data, _ := os.ReadFile(h.victim); !strings.HasPrefix(string(data), "victim-") || strings.Contains(string(data), "CONFIG_") {
				t.Errorf("patcheval wrote through the build's link into %s: %q", h.victim, data)
			}
			secret, _ := os.ReadFile(h.victim)
			filepath.WalkDir(filepath.Join(h.cache, "builds"), func(p string, d os.DirEntry, err error) error {
				if err == nil && d.Type().IsRegular() && !strings.Contains(p, "/out/") && !strings.Contains(p, "other-evaluation") {
					if data, _ := os.ReadFile(p); len(secret) > 0 && bytes.Contains(data, bytes.TrimSpace(secret)) {
						t.Errorf("the host file's content was stored in %s", p)
					}
				}
				return nil
			})
		},
	},
	{
		// Allocates past the aggregate memory bound (96 MiB) with four
		// processes of 48 MiB, each far under its own RLIMIT_AS: the
		// OOM killer ends them in the build's cgroup and the build fails
		// naming the bound (where the machine has cgroups; else skipped).
		name: "memory-hog",
		makefile: "%: ; @for i in 1 2 3 4; do (head -c 48M /dev/zero | tail >/dev/null; echo SURVIVED >&2) & done; wait; " +
			"echo \"HOG DONE\" >&2; false\n",
		memory: 96 << 20,
		check: func(t *testing.T, h *hostileEnv, err error, log string) {
			if err == nil || !strings.Contains(err.Error(), "more than the memory limit of 96 MiB") {
				t.Errorf("error %v, want one naming the 96 MiB memory limit", err)
			}
		},
	},
	{
		// Fills the disk, 16 MiB at a time (bounded at 640 MiB). The
		// watch stops it some time after it passes 64 MiB (how far past
		// depends on the disk and the machine's load: CI saw 240 MiB),
		// then what it wrote is removed.
		name: "fill-disk",
		makefile: "%: ; @i=0; while [ $$i -lt 40 ]; do dd if=/dev/zero of=$(O)/fill$$i bs=1M count=16 2>/dev/null; " +
			"i=$$((i+1)); done; echo \"FILLED $$i\" >&2; false\n",
		check: func(t *testing.T, h *hostileEnv, err error, log string) {
			if err == nil || !strings.Contains(err.Error(), "disk limit") || !strings.Contains(err.Error(), "what it wrote was removed") {
				t.Errorf("error %v, want one naming the disk limit and the removal", err)
			}
			if strings.Contains(log, "FILLED") {
				t.Errorf("the attack ran to its end (640 MiB): the watch never stopped it")
			}
			if used := sandbox.DiskUsage(filepath.Join(h.cache, "builds")); used > 64<<20 {
				t.Errorf("the stopped build left %d MiB in the cache, over its 64 MiB limit", used>>20)
			}
		},
	},
}

// TestHostileSeriesContained builds, for each attack, a commit whose
// top-level Makefile is hostile, through the real build path (kcc, the
// config target's make), and checks that the attack is contained, that
// the build fails as the tree's fault (exit 1) with a reason, and that no
// secret reaches the error, the build log or the metadata. With
// PATCHEVAL_SANDBOX=off every subtest fails (checked by hand: see the
// commit).
func TestHostileSeriesContained(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Log("not root: the sandbox keeps this user's uid (user namespace)")
	}
	for _, hs := range hostileSeries {
		t.Run(hs.name, func(t *testing.T) {
			if hs.memory > 0 && !strings.HasPrefix(sandbox.Aggregate(sandbox.Limits{}), "cgroup") {
				t.Skipf("no aggregate memory bound on this machine: %s", sandbox.Aggregate(sandbox.Limits{}))
			}
			h := newHostileEnv(t)
			commit := testgit.Commit(t, h.repo, h.base, "hostile "+hs.name, "2026-11-02T10:00:00Z",
				map[string]string{"Makefile": h.expand(hs.makefile)})
			var logBuf bytes.Buffer
			req := build.Request{Repo: h.repo, Commit: commit, Arch: "x86_64", BaseConfig: "tinyconfig", Variant: hs.name,
				Symbols: map[string]string{"PATCHEVAL_HOSTILE": "y"}}
			opts := build.Options{CacheDir: h.cache, Jobs: 2, Nice: 10, NoNetwork: true, Timeout: 3 * time.Minute, Log: &logBuf,
				Limits: sandbox.Limits{Procs: 64, Disk: 64 << 20, FileSize: 32 << 20, Memory: hs.memory}}
			if hs.memory > 0 {
				// RLIMIT_NPROC counts every process of the build user,
				// other builds' too: not what this attack is about.
				opts.Limits.Procs = 0
			}
			a, err := build.Build(context.Background(), req, opts)
			log := logBuf.String()
			t.Logf("%s: %v", hs.name, err)
			if err == nil {
				t.Fatalf("a hostile build passed")
			}
			// The issue's own Makefile's "cat: TOKENFILE: No such file or
			// directory" reads, to the log classifier, as a missing tool
			// (exit 3): what the tree prints is the tree's to choose.
			var ke *build.KernelError
			var ie *build.InfraError
			if !errors.As(err, &ke) && !((hs.name == "secrets" || hs.infraOK) && errors.As(err, &ie) && fail.Code(err) == 3) {
				t.Errorf("error %T %v (exit %d), want a kernel error (exit 1)", err, err, fail.Code(err))
			}
			hs.check(t, h, err, log)
			meta, _ := json.Marshal(a)
			for _, s := range h.secrets(t) {
				for what, text := range map[string]string{"error": err.Error(), "build log": log, "metadata": string(meta)} {
					if strings.Contains(text, s) {
						t.Errorf("secret %q in the %s", s, what)
					}
				}
			}
		})
	}
}

// TestBuildRefusesWithoutSandbox: on a machine that cannot sandbox, a
// build refuses to run the tree's Makefile (infrastructure error, exit 3,
// naming what is missing and the opt-out) and the Makefile never runs;
// with Options.Unsandboxed the operator's trusted tree builds as before.
func TestBuildRefusesWithoutSandbox(t *testing.T) {
	if sandbox.Disabled() {
		t.Skip("PATCHEVAL_SANDBOX=off: the sandbox is switched off for the whole run")
	}
	restore := sandbox.SetCheckForTest(errors.New("sandbox: bwrap (apt-get install bubblewrap) not installed"))
	defer restore()
	h := newHostileEnv(t)
	marker := filepath.Join(h.state, "ran")
	commit := testgit.Commit(t, h.repo, h.base, "touches a marker", "2026-11-02T10:00:00Z",
		map[string]string{"Makefile": "%: ; @touch " + marker + "; false\n"})
	req := build.Request{Repo: h.repo, Commit: commit, Arch: "x86_64", BaseConfig: "tinyconfig"}
	opts := build.Options{CacheDir: h.cache, Jobs: 1, NoNetwork: true, CompilerCache: "none"}
	_, err := build.Build(context.Background(), req, opts)
	var ie *build.InfraError
	if !errors.As(err, &ie) || fail.Code(err) != 3 || !strings.Contains(err.Error(), "bwrap") ||
		!strings.Contains(err.Error(), sandbox.EnvSwitch+"=off") {
		t.Errorf("build without a sandbox: %v (exit %d), want an infrastructure error naming bwrap and the opt-out", err, fail.Code(err))
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the tree's Makefile ran without the sandbox")
	}
	opts.Unsandboxed = true
	if _, err := build.Build(context.Background(), req, opts); err == nil {
		t.Fatal("the marker Makefile's build passed")
	}
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("with Unsandboxed the tree's Makefile did not run: %v", err)
	}
}

// With --compiler-cache ccache the sandboxed build writes its own
// commit's ccache directory (ccache has no read-only layers to share).
func TestCCacheDirPerCommit(t *testing.T) {
	if _, err := exec.LookPath("ccache"); err != nil {
		t.Skip("ccache not installed")
	}
	h := newHostileEnv(t)
	commit := testgit.Commit(t, h.repo, h.base, "ccache probe", "2026-11-02T10:00:00Z",
		map[string]string{"Makefile": "%: ; @touch $$CCACHE_DIR/probe && echo \"CCACHE=$$CCACHE_DIR\" >&2; false\n"})
	var logBuf bytes.Buffer
	req := build.Request{Repo: h.repo, Commit: commit, Arch: "x86_64", BaseConfig: "tinyconfig"}
	_, err := build.Build(context.Background(), req, build.Options{CacheDir: h.cache, Jobs: 1, CompilerCache: "ccache", Log: &logBuf})
	want := filepath.Join(h.cache, "ccache-layers", commit)
	if !strings.Contains(logBuf.String(), "CCACHE="+want) {
		t.Fatalf("build: %v; log:\n%s\nwant the ccache directory %s", err, logBuf.String(), want)
	}
	if _, err := os.Stat(filepath.Join(want, "probe")); err != nil {
		t.Errorf("the build could not write its ccache directory: %v", err)
	}
}
