package build

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/patcheval/patcheval/internal/gittree"
	"github.com/patcheval/patcheval/internal/sandbox"
)

// lineageDepth bounds the ancestor walk that decides which kcc layers a
// build reads and whether a workspace's O= directory may be reused: a
// series of up to this many patches finds its base.
const lineageDepth = 64

// command is exec.Cmd for argv (make, or a recorded compile) run with the
// tree's code contained: in the sandbox (internal/sandbox) with only the
// build's O= and home directories and its kcc layer writable, the sources
// and the compiler cache's other layers read-only, no network; or, when
// the operator switched the sandbox off, as before (unshare -n, and a PID
// namespace so everything dies with us).
func (r *runner) command(ctx context.Context, argv, env []string) (*exec.Cmd, error) {
	r.iso.ScrubbedEnv = true
	r.iso.Env = nil
	for _, e := range env {
		k, _, _ := strings.Cut(e, "=")
		r.iso.Env = append(r.iso.Env, k)
	}
	var cmd *exec.Cmd
	if r.unsandboxed || sandbox.Disabled() {
		cmd = r.unsandboxedCommand(ctx, argv)
	} else {
		if err := sandbox.Check(); err != nil {
			return nil, &InfraError{Reason: "sandbox", Err: err,
				Msg: err.Error() + ": refusing to run the tree's Makefiles unsandboxed (" + sandbox.EnvSwitch + "=off runs trusted trees without it)"}
		}
		if r.kcc == "" && r.tc.CCache != "" {
			if err := os.MkdirAll(r.ccacheDir(), 0o755); err != nil {
				return nil, &InfraError{Reason: "io", Msg: err.Error(), Err: err}
			}
		}
		spec := r.spec()
		if err := sandbox.Prepare(spec.Writable...); err != nil {
			return nil, &InfraError{Reason: "sandbox", Msg: err.Error(), Err: err}
		}
		c, err := spec.Command(ctx, argv)
		if err != nil {
			return nil, &InfraError{Reason: "sandbox", Msg: err.Error(), Err: err}
		}
		cmd = c
		r.iso.NoNetwork = true
		r.iso.Note = ""
		r.iso.Sandbox = sandbox.Describe()
		r.iso.Aggregate = sandbox.Aggregate(spec.Limits)
	}
	cmd.Env = env
	cmd.Dir = r.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	return cmd, nil
}

// spec is the build's view of the machine.
func (r *runner) spec() sandbox.Spec {
	s := sandbox.Spec{
		Writable: []string{r.out, r.home},
		ReadOnly: []string{r.src},
		Dir:      r.out,
		Limits:   r.limits,
	}
	if r.kcc != "" {
		s.ReadOnly = append(s.ReadOnly, filepath.Dir(r.kcc))
		s.ReadOnly = append(s.ReadOnly, r.kccRead...)
		s.Writable = append(s.Writable, r.kccLayer)
	} else if r.tc.CCache != "" {
		s.Writable = append(s.Writable, r.ccacheDir())
	}
	// A toolchain installed outside /usr (an unpacked cross compiler).
	for _, c := range []string{r.tc.CC, r.tc.CrossCompile + "gcc"} {
		if p, err := exec.LookPath(strings.Fields(c + " x")[0]); err == nil && filepath.IsAbs(p) && !strings.HasPrefix(p, "/usr/") {
			s.ReadOnly = append(s.ReadOnly, filepath.Dir(p))
		}
	}
	return s
}

// unsandboxedCommand is the command as it ran before the sandbox: network
// and PID namespaces where unshare works, the host's files and uid.
func (r *runner) unsandboxedCommand(ctx context.Context, argv []string) *exec.Cmd {
	r.iso.Sandbox = sandbox.Describe()
	if r.unsandboxed && !sandbox.Disabled() {
		r.iso.Sandbox = "off (Options.Unsandboxed)"
	}
	var unshare []string
	if r.noNetwork {
		if ok, note := canUnshareNet(); ok {
			unshare = append(unshare, "-n")
			r.iso.NoNetwork = true
			r.iso.Note = ""
		} else {
			r.iso.Note = note
		}
	} else {
		r.iso.Note = "network isolation not requested"
	}
	// make and everything it starts die with this process, also when it
	// dies of SIGKILL and runs no cleanup: make runs in its own PID
	// namespace whose first process is killed when unshare dies, and
	// unshare is killed when this process dies (Pdeathsig).
	if canUnsharePID() {
		unshare = append(unshare, "-p", "-f", "--kill-child")
	}
	if len(unshare) > 0 {
		argv = append(append(append([]string{"unshare"}, unshare...), "--"), argv...)
	}
	return exec.CommandContext(ctx, argv[0], argv[1:]...)
}

// watchDisk bounds what the running command writes into its writable
// directories (sandbox.DiskWatch); the returned function stops the watch
// and returns its error when it stopped the command.
func (r *runner) watchDisk(ctx context.Context, cmd *exec.Cmd) func() error {
	if r.unsandboxed || sandbox.Disabled() {
		return func() error { return nil }
	}
	limit := r.limits.Disk
	if limit <= 0 {
		limit = sandbox.DefaultLimits.Disk
	}
	interval := 5 * time.Second
	if limit < 1<<30 {
		interval = 200 * time.Millisecond
	}
	dirs := []string{r.out, r.home}
	if r.kccLayer != "" {
		dirs = append(dirs, r.kccLayer)
	}
	return sandbox.DiskWatch(ctx, limit, interval, func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }, dirs...)
}

// ccacheDir is ccache's directory: one per commit, like kcc's layers
// (ccache has no read-only layers to share safely).
func (r *runner) ccacheDir() string {
	if r.kccLayer == "" {
		return filepath.Join(r.cacheDir, "ccache")
	}
	return filepath.Join(r.cacheDir, "ccache-layers", filepath.Base(r.kccLayer))
}

// kccLayers is the commit's own kcc layer and the existing layers of its
// ancestors (nearest first), then those of other commits of the
// repository with the tree of the commit or of one of those ancestors:
// the same code, so reading their objects is as safe as reading the
// ancestor's (package kcc). A release that internal/linuxtree relinks
// onto an earlier release imported after it (same tree, new commit id)
// keeps its compiled objects that way.
func (j *job) kccLayers(lineage []string) (own string, read []string) {
	root := filepath.Join(j.opts.CacheDir, "kcc", "layers")
	own = filepath.Join(root, j.commit)
	for _, c := range lineage[1:] {
		p := filepath.Join(root, c)
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			read = append(read, p)
		}
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		return own, read
	}
	var others []string
	for _, e := range entries {
		if e.IsDir() && e.Name() != j.commit {
			others = append(others, e.Name())
		}
	}
	same, err := gittree.SameTrees(j.req.Repo, lineage, others)
	if err != nil {
		return own, read
	}
	for _, c := range same {
		read = append(read, filepath.Join(root, c))
	}
	return own, read
}

// lineage is the commit and its ancestors, up to lineageDepth commits,
// nearest first; on a read error only the commit itself.
func (j *job) lineage() []string {
	anc, err := gittree.Ancestors(j.req.Repo, j.commit, lineageDepth)
	if err != nil || len(anc) == 0 {
		return []string{j.commit}
	}
	return anc
}

// builtMark names the file, beside a workspace's out/ and home/ and out
// of the sandbox's reach, holding the commit whose build last ran there.
const builtMark = "built-commit"

// claimWorkspace makes dir (holding out/ and home/) fit for a build of
// the job's commit: reused when every build that ran there since it was
// last emptied was of the commit or an ancestor (the last one is, then
// all are), emptied otherwise. A build runs the tree's code, which may
// leave anything in its O= directory (an object with a future mtime
// that make never remakes, a trojaned host program); only builds of its
// descendants, which carry its code anyway, may then build on it.
func (j *job) claimWorkspace(dir string, lineage []string) (emptied bool, err error) {
	mark := filepath.Join(dir, builtMark)
	prev, _ := os.ReadFile(mark)
	last := strings.TrimSpace(string(prev))
	ok := false
	for _, c := range lineage {
		if c == last {
			ok = true
			break
		}
	}
	if !ok {
		used := false
		for _, d := range []string{"out", "home"} {
			if ents, err := os.ReadDir(filepath.Join(dir, d)); err == nil && len(ents) > 0 {
				used = true
			}
		}
		if used {
			for _, d := range []string{"out", "home"} {
				p := filepath.Join(dir, d)
				if err := os.RemoveAll(p); err != nil {
					return false, fmt.Errorf("emptying %s: %w", p, err)
				}
				if err := os.MkdirAll(p, 0o755); err != nil {
					return false, err
				}
			}
			emptied = true
		}
	}
	if last != j.commit {
		if err := writeAtomic(mark, []byte(j.commit+"\n")); err != nil {
			return emptied, err
		}
	}
	return emptied, nil
}

// inFlight are the builds of this process under way, by repository and
// arch: a build waits for its ancestors' (waitForAncestors).
var inFlight = struct {
	sync.Mutex
	m map[string][]*flight
}{m: map[string][]*flight{}}

type flight struct {
	commit string
	done   chan struct{}
}

func (j *job) flightKey() string { return j.req.Repo + "\x00" + j.arch.Name }

// register records the build as under way; the returned function ends it.
func (j *job) register() (unregister func()) {
	f := &flight{commit: j.commit, done: make(chan struct{})}
	k := j.flightKey()
	inFlight.Lock()
	inFlight.m[k] = append(inFlight.m[k], f)
	inFlight.Unlock()
	return func() {
		inFlight.Lock()
		fs := inFlight.m[k]
		for i, x := range fs {
			if x == f {
				inFlight.m[k] = append(fs[:i:i], fs[i+1:]...)
				break
			}
		}
		inFlight.Unlock()
		close(f.done)
	}
}

// waitForAncestors waits, before taking a turn of the budget, for the
// builds of this process that build an ancestor of the commit (same
// repository and arch): a build reads only its ancestors' kcc layers,
// so the patched kernel built beside its base would otherwise compile
// every object the base is compiling at the same time, and reuse the
// O= directory only after the base (claimWorkspace). Ancestry has no
// cycles and nothing waits holding a turn, so no wait is circular.
func (j *job) waitForAncestors(ctx context.Context) error {
	anc := map[string]bool{}
	for _, c := range j.ancestry {
		if c != j.commit {
			anc[c] = true
		}
	}
	for {
		var wait *flight
		inFlight.Lock()
		for _, f := range inFlight.m[j.flightKey()] {
			if anc[f.commit] {
				wait = f
				break
			}
		}
		inFlight.Unlock()
		if wait == nil {
			return nil
		}
		j.opts.Progress.Status("%s: waiting for the build of its ancestor %.12s (its compiler-cache objects)", j.label, wait.commit)
		select {
		case <-wait.done:
		case <-ctx.Done():
			return &InfraError{Reason: "interrupted", Msg: "build interrupted", Err: ctx.Err()}
		}
	}
}

// The directories a build's sandbox writes (O=, home, its kcc layer) hold
// whatever the tree's code left there: a .config that is a symbolic link
// to the token file, a named pipe, /dev/zero. patcheval reads and writes
// files there only through these, which never leave the directory (no
// link out of it is followed: os.Root), never block on a pipe or device,
// and read at most maxBelow bytes.
const maxBelow = 256 << 20

// openBelow opens the regular file name below dir for reading.
func openBelow(dir, name string) (*os.File, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	f, err := r.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s: not a regular file", filepath.Join(dir, name))
	}
	return f, nil
}

// readBelow reads the regular file name below dir.
func readBelow(dir, name string) ([]byte, error) {
	f, err := openBelow(dir, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxBelow+1))
	if err == nil && len(data) > maxBelow {
		err = fmt.Errorf("%s: over %d MiB", filepath.Join(dir, name), maxBelow>>20)
	}
	return data, err
}

// writeBelow replaces name below dir with a new regular file holding
// data (whatever was there, a link included, is removed first).
func writeBelow(dir, name string, data []byte) error {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer r.Close()
	if err := r.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	f, err := r.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// copyBelow copies the regular file name below dir to dst (outside it).
func copyBelow(dir, name, dst string) error {
	in, err := openBelow(dir, name)
	if err != nil {
		return err
	}
	defer in.Close()
	o, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(o, in); err != nil {
		o.Close()
		return err
	}
	return o.Close()
}
