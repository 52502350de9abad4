package ssh

import (
	"context"
	"errors"
	"fmt"
	"net"
	neturl "net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/evaluate/guest"
	"github.com/patcheval/patcheval/internal/buildid"
	"github.com/patcheval/patcheval/internal/fail"
)

// sshd starts a real OpenSSH server on a free loopback port with its own
// host key and authorized_keys and returns the target URL and identity.
func sshd(t *testing.T) (string, string) {
	t.Helper()
	url, id, _ := sshdProc(t)
	return url, id
}

// sshdProc is sshd, with the server's process id.
func sshdProc(t *testing.T) (string, string, int) {
	t.Helper()
	bin := "/usr/sbin/sshd"
	if _, err := os.Stat(bin); err != nil {
		t.Fatal("openssh-server is needed (apt-get install openssh-server)")
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o700)
	run := func(name string, args ...string) {
		if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
	}
	run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", filepath.Join(dir, "host_key"))
	run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", filepath.Join(dir, "id"))
	pub, _ := os.ReadFile(filepath.Join(dir, "id.pub"))
	os.WriteFile(filepath.Join(dir, "authorized_keys"), pub, 0o600)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cfg := fmt.Sprintf(`Port %d
ListenAddress 127.0.0.1
HostKey %s/host_key
AuthorizedKeysFile %s/authorized_keys
PidFile %s/sshd.pid
StrictModes no
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
`, port, dir, dir, dir)
	os.WriteFile(filepath.Join(dir, "sshd_config"), []byte(cfg), 0o600)
	os.MkdirAll("/run/sshd", 0o755) // privilege separation directory
	cmd := exec.Command(bin, "-D", "-e", "-f", filepath.Join(dir, "sshd_config"))
	logf, _ := os.Create(filepath.Join(dir, "sshd.log"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "sshd.log"))
			t.Logf("sshd log:\n%s", b)
		}
	})
	for i := 0; i < 50; i++ {
		if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			c.Close()
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	u, _ := user.Current()
	return fmt.Sprintf("ssh://%s@127.0.0.1:%d", u.Username, port), filepath.Join(dir, "id"), cmd.Process.Pid
}

var noHostCheck = []string{"StrictHostKeyChecking=no", "UserKnownHostsFile=/dev/null", "LogLevel=ERROR"}

func TestSSHTargetAgent(t *testing.T) {
	url, id := sshd(t)
	hookOut := filepath.Join(t.TempDir(), "hook")
	tg, err := New(Config{URL: url, IdentityFile: id, Options: noHostCheck, CacheDir: t.TempDir(),
		BootHook: "echo $PATCHEVAL_VARIANT $PATCHEVAL_KERNEL_IMAGE > " + hookOut, BootWait: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	k := evaluate.Kernel{Variant: "running", Image: "/boot/vmlinuz-test"}
	plan := guest.Plan{Iterations: 2, Benchmarks: []guest.Bench{{Name: "kill", Ops: 20000}, {Name: "getppid", Ops: 20000}, {Name: "kill-child", Ops: 5000}}}
	res, err := tg.Boot(context.Background(), k, plan)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(hookOut); strings.TrimSpace(string(b)) != "running /boot/vmlinuz-test" {
		t.Errorf("boot hook wrote %q", b)
	}
	if res.Output.Info == nil || !res.Output.Info.NoInit || res.Env.KernelRelease == "" || res.Env.Target != url {
		t.Errorf("info %+v env %+v", res.Output.Info, res.Env)
	}
	if len(res.Output.Results) != 6 {
		t.Fatalf("%d results, want 6:\n%s", len(res.Output.Results), res.Console)
	}
	samples, _ := evaluate.Samples("running", 0, res)
	if len(samples) != 12 {
		t.Errorf("%d samples, want 12", len(samples))
	}
	for _, r := range res.Output.Results {
		t.Logf("%s #%d %.0f ns/op", r.Benchmark, r.Iteration, r.NsPerOp)
	}
}

func TestSSHTargetStressNG(t *testing.T) {
	if _, err := exec.LookPath("stress-ng"); err != nil {
		t.Fatal("stress-ng is needed (apt-get install stress-ng)")
	}
	url, id := sshd(t)
	tg, _ := New(Config{URL: url, IdentityFile: id, Options: noHostCheck})
	res, err := tg.Boot(context.Background(), evaluate.Kernel{Variant: "running"},
		guest.Plan{Benchmarks: []guest.Bench{{Name: guest.BenchStressNGKill, Seconds: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Output.Results) != 1 {
		t.Fatalf("results %+v\n%s", res.Output.Results, res.Console)
	}
	r := res.Output.Results[0]
	if r.OpsPerSec <= 0 || r.Iterations <= 0 || r.DurationNS < 5e8 || res.Output.Info == nil {
		t.Errorf("stress-ng result %+v info %+v", r, res.Output.Info)
	}
	t.Logf("stress-ng kill: %.0f bogo ops/s, counters %v", r.OpsPerSec, r.Counters)
}

func TestSSHTargetDown(t *testing.T) {
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	tg, _ := New(Config{URL: fmt.Sprintf("ssh://nobody@127.0.0.1:%d", port), Options: noHostCheck, BootWait: time.Second})
	_, err := tg.Boot(context.Background(), evaluate.Kernel{Variant: "v"}, guest.Plan{Benchmarks: []guest.Bench{{Name: "kill"}}})
	var be *evaluate.BootError
	if !errors.As(err, &be) || fail.KindOf(err) != fail.KindInfra || be.Phase != evaluate.PhaseInfra {
		t.Fatalf("unreachable host: %v", err)
	}
	if _, err := New(Config{URL: "http://x"}); fail.KindOf(err) != fail.KindInput {
		t.Errorf("bad URL: %v", err)
	}
}

func TestParseStressNG(t *testing.T) {
	out := []byte(`stress-ng: metrc: [7051] stressor       bogo ops real time  usr time  sys time   bogo ops/s     bogo ops/s
stress-ng: metrc: [7051]                           (secs)    (secs)    (secs)   (real time) (usr+sys time)
stress-ng: metrc: [7051] kill              98840      2.00      0.22      1.61     49411.36       53790.33
stress-ng: metrc: [7051] kill              417614.99 kill calls per sec (geometic mean of 1 instances)
`)
	r, err := ParseStressNG(out)
	if err != nil || r.Iterations != 98840 || r.OpsPerSec != 49411.36 || r.Counters["kill_calls_per_s"] != 417614.99 {
		t.Fatalf("%+v %v", r, err)
	}
	c := ParsePerfStat([]byte("0.40,msec,task-clock,397748,100.00,0.299,CPUs utilized\n<not supported>,,cycles,0,100.00,,\n"))
	if len(c) != 1 || c["perf:task-clock"] != 0.40 {
		t.Errorf("perf: %v", c)
	}
}

// hostBuildID is the build-id of the kernel this test runs on (the
// machine the test's sshd serves).
func hostBuildID(t *testing.T) string {
	raw, err := os.ReadFile(guest.NotesPath)
	if err != nil {
		t.Fatalf("reading %s: %v", guest.NotesPath, err)
	}
	id := buildid.ParseNotesAny(raw)
	if id == "" {
		t.Fatalf("%s holds no build-id", guest.NotesPath)
	}
	return id
}

// TestSSHVerifiesRunningKernel: without a boot method the machine's
// running kernel is measured only when it is the kernel asked for: its
// build-id and command line; another one is an infra error naming both
// and no sample.
func TestSSHVerifiesRunningKernel(t *testing.T) {
	url, id := sshd(t)
	tg, err := New(Config{URL: url, IdentityFile: id, Options: noHostCheck, CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	running := hostBuildID(t)
	plan := guest.Plan{Benchmarks: []guest.Bench{{Name: "getppid", Ops: 2000}}}
	res, err := tg.Boot(context.Background(), evaluate.Kernel{Variant: "host", BuildID: running}, plan)
	if err != nil {
		t.Fatal(err)
	}
	if res.Env.BuildID != running || !res.Env.Verified || !strings.Contains(string(res.Console), "--- verified: running ") {
		t.Errorf("env %+v console %s", res.Env, res.Console)
	}
	other := strings.Repeat("ab", 20)
	for _, k := range []evaluate.Kernel{
		{Variant: "other", BuildID: other, Image: "/builds/x/bzImage"},
		{Variant: "host-cmdline", BuildID: running, Cmdline: "patcheval.never=1"},
	} {
		res, err := tg.Boot(context.Background(), k, plan)
		var be *evaluate.BootError
		if !errors.As(err, &be) || be.Phase != evaluate.PhaseWrongKernel || fail.KindOf(err) != fail.KindInfra {
			t.Fatalf("%s: %v", k.Variant, err)
		}
		if k.Variant == "other" && (!strings.Contains(be.Msg, "build-id "+running) || !strings.Contains(be.Msg, "want "+other+" (/builds/x/bzImage)")) {
			t.Errorf("message does not name both kernels: %s", be.Msg)
		}
		if k.Variant == "host-cmdline" && !strings.Contains(be.Msg, "lacks patcheval.never=1") {
			t.Errorf("message does not name the missing parameter: %s", be.Msg)
		}
		if len(res.Output.Results) != 0 {
			t.Errorf("%s: %d results measured on the wrong kernel", k.Variant, len(res.Output.Results))
		}
	}
}

// TestSSHHookEnvScrubbed: the boot hook sees only HookEnv's variables,
// never patcheval's secrets, and its output (the console) holds none.
func TestSSHHookEnvScrubbed(t *testing.T) {
	t.Setenv("PATCHEVAL_SMTP_PASSWORD", "hunter2-smtp")
	t.Setenv("PATCHEVAL_TOKEN", "hunter2-token")
	t.Setenv("SOME_CI_SECRET", "hunter2-ci")
	url, id := sshd(t)
	envOut := filepath.Join(t.TempDir(), "env")
	tg, err := New(Config{URL: url, IdentityFile: id, Options: noHostCheck, CacheDir: t.TempDir(),
		BootHook: "env > " + envOut + "; env", BootWait: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	res, err := tg.Boot(context.Background(), evaluate.Kernel{Variant: "v", Image: "/img"}, guest.Plan{Benchmarks: []guest.Bench{{Name: "getppid", Ops: 1000}}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(res.Console), "hunter2") {
		t.Errorf("a secret reached the console:\n%s", res.Console)
	}
	b, _ := os.ReadFile(envOut)
	allowed := map[string]bool{"PATH": true, "HOME": true, "USER": true, "LOGNAME": true, "LANG": true, "LC_ALL": true, "TZ": true,
		"TMPDIR": true, "SSH_AUTH_SOCK": true, "PWD": true, "SHLVL": true, "_": true, "OLDPWD": true}
	seen := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		name, _, _ := strings.Cut(l, "=")
		seen[name] = true
		if !allowed[name] && !strings.HasPrefix(name, "PATCHEVAL_") || strings.Contains(l, "hunter2") {
			t.Errorf("the hook saw %q", l)
		}
	}
	for _, want := range []string{"PATCHEVAL_VARIANT", "PATCHEVAL_KERNEL_IMAGE", "PATCHEVAL_HOST", "PATCHEVAL_BUILD_ID", "PATH"} {
		if !seen[want] {
			t.Errorf("the hook lacks %s (env: %s)", want, b)
		}
	}
}

// TestSSHBadAccess: a wrong host key, a refused login and a machine
// without kexec are each one clear line, an infra error, at once (no
// waiting out the boot deadline), and no sample.
func TestSSHBadAccess(t *testing.T) {
	url, id := sshd(t)
	dir := t.TempDir()
	other := filepath.Join(dir, "other")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", other).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v\n%s", err, out)
	}
	pub, _ := os.ReadFile(other + ".pub")
	u, _ := neturl.Parse(url)
	known := filepath.Join(dir, "known_hosts")
	os.WriteFile(known, []byte(fmt.Sprintf("[%s]:%s %s", u.Hostname(), u.Port(), pub)), 0o600)
	for _, c := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"wrong host key", Config{IdentityFile: id, Options: []string{"StrictHostKeyChecking=yes", "UserKnownHostsFile=" + known}},
			"host key verification failed: the machine's host key is not the one known_hosts holds"},
		{"refused login", Config{IdentityFile: other, Options: append([]string{"IdentitiesOnly=yes"}, noHostCheck...)},
			"login refused (" + u.User.Username() + "@127.0.0.1: Permission denied (publickey)"},
		{"no kexec", Config{IdentityFile: id, Options: noHostCheck, Boot: BootKexec, Kexec: "/nonexistent/kexec"},
			"has no /nonexistent/kexec (install kexec-tools on the machine"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := c.cfg
			cfg.URL, cfg.CacheDir, cfg.BootWait = url, t.TempDir(), 5*time.Minute
			tg, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			img := filepath.Join(t.TempDir(), "bzImage")
			os.WriteFile(img, []byte("not a kernel"), 0o644)
			start := time.Now()
			res, err := tg.Boot(context.Background(), evaluate.Kernel{Variant: "v", Image: img, BuildID: strings.Repeat("cd", 20)},
				guest.Plan{Benchmarks: []guest.Bench{{Name: "getppid", Ops: 1000}}})
			if err == nil || fail.KindOf(err) != fail.KindInfra || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want an infra error with %q", err, c.want)
			}
			if time.Since(start) > time.Minute {
				t.Errorf("took %v: waited instead of failing", time.Since(start))
			}
			if len(res.Output.Results) != 0 {
				t.Errorf("%d results", len(res.Output.Results))
			}
			t.Logf("%s: %s", c.name, firstLine(err.Error()))
		})
	}
}
