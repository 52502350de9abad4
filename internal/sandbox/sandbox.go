// Package sandbox runs untrusted programs -- a patched kernel tree's
// Makefiles, scripts and host programs, and QEMU booting what they built
// -- inside bubblewrap (bwrap, Debian's package "bubblewrap"), the
// sandbox Flatpak and many distributions' build tools use: a maintained
// setuid-free program that sets up the mount, PID, network, IPC and UTS
// namespaces of one command from a command line, so patcheval needs no
// namespace code of its own and every mount is visible in the argv.
//
// What a sandboxed command gets (Spec.Command):
//
//   - its own mount namespace whose root is an empty tmpfs with /usr (and
//     the merged-usr links /bin, /lib, ...), a few files of /etc (dynamic
//     linker, alternatives, passwd/group, time zone) and the Spec's
//     read-only paths bound read-only, the Spec's writable directories
//     bound read-write, a private /tmp (a size-limited tmpfs), a new /proc
//     for its own PID namespace and a minimal /dev; nothing else of the
//     host: no patcheval state, configuration, cache of other builds,
//     token or password files;
//   - its own PID namespace (no view of other processes or their
//     environments; everything dies with the sandbox), IPC and UTS
//     namespaces, and -- unless Spec.Network -- a network namespace with
//     only a loopback device;
//   - an unprivileged uid: run as root, patcheval starts bwrap as root and
//     bwrap runs setpriv, which drops to the dedicated build user
//     (BuildUser, or the fixed uid FallbackUID when the user does not
//     exist), clears supplementary groups, every capability and sets
//     no_new_privs; run as another user, bwrap creates a user namespace
//     and the command keeps that user's uid;
//   - resource limits (prlimit, RLIMIT_*): CPU seconds and address space
//     per process, file size, open files, and the number of processes of
//     the uid (RLIMIT_NPROC, exact only under the dedicated uid); the
//     disk written into the writable directories is bounded by DiskWatch.
//
// Fail closed: Check reports what is missing (bwrap, setpriv, prlimit,
// namespaces) and callers refuse to run untrusted code without a sandbox
// (an infrastructure error, exit 3) unless the operator set
// PATCHEVAL_SANDBOX=off (Disabled), which runs the commands as before.
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// EnvSwitch is the operator's setting: "off" runs untrusted builds and
// boots without a sandbox (trusted local trees only); anything else, or
// unset, requires the sandbox.
const EnvSwitch = "PATCHEVAL_SANDBOX"

// BuildUser is the system user sandboxed commands run as when patcheval
// runs as root (.ci/install-deps creates it); FallbackUID is used when it
// does not exist. Either way no other process should run as that uid, so
// RLIMIT_NPROC counts the sandboxes' processes only.
const (
	BuildUser   = "patcheval-build"
	FallbackUID = 64901
)

// Disabled says whether the operator switched the sandbox off.
func Disabled() bool { return strings.EqualFold(strings.TrimSpace(os.Getenv(EnvSwitch)), "off") }

// EnvReadOnly is the operator's list of extra paths (absolute, separated
// by ':') that every sandboxed command sees read-only at their own paths:
// a toolchain or a site's reference files outside /usr. A path that is
// missing or not absolute makes every sandboxed command fail (Spec.Args),
// never a silent wider or narrower view.
const EnvReadOnly = "PATCHEVAL_SANDBOX_READONLY"

// extraReadOnly returns EnvReadOnly's paths.
func extraReadOnly() ([]string, error) {
	var ps []string
	for _, p := range strings.Split(os.Getenv(EnvReadOnly), ":") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		if !filepath.IsAbs(p) {
			return nil, fmt.Errorf("sandbox: %s: %q is not an absolute path", EnvReadOnly, p)
		}
		ps = append(ps, filepath.Clean(p))
	}
	return ps, nil
}

// Limits bound what a sandboxed command may use. Zero fields take the
// defaults of DefaultLimits.
type Limits struct {
	// CPUSeconds is RLIMIT_CPU of each process (SIGXCPU, then SIGKILL).
	CPUSeconds int64
	// AddressSpace is RLIMIT_AS of each process, bytes.
	AddressSpace int64
	// FileSize is RLIMIT_FSIZE: no file written grows past it.
	FileSize int64
	// Procs is RLIMIT_NPROC: processes (threads) of the sandbox's uid.
	Procs int64
	// OpenFiles is RLIMIT_NOFILE.
	OpenFiles int64
	// Disk is what the writable directories may hold, bytes (DiskWatch).
	Disk int64
	// TmpSize is the private /tmp tmpfs's size, bytes.
	TmpSize int64
	// Memory bounds what the command's processes use together, bytes
	// (a cgroup's memory.max; cgroup.go), where the machine allows.
	Memory int64
}

// DefaultLimits fit a kernel build (allmodconfig's O= directory is about
// 15 GB; vmlinux links in under 4 GB; a -j64 build runs a few hundred
// processes) while stopping a runaway one.
var DefaultLimits = Limits{
	CPUSeconds:   4 * 3600,
	AddressSpace: 16 << 30,
	FileSize:     8 << 30,
	Procs:        4096,
	OpenFiles:    8192,
	Disk:         40 << 30,
	TmpSize:      2 << 30,
	Memory:       defaultMemory(),
}

// defaultMemory is three quarters of the machine's memory (16 GiB when
// /proc/meminfo cannot be read): a build may use most of the machine, not
// all of it.
func defaultMemory() int64 {
	data, err := os.ReadFile("/proc/meminfo")
	if err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
				if kb, err := strconv.ParseInt(f[1], 10, 64); err == nil && kb > 0 {
					return kb << 10 / 4 * 3
				}
			}
		}
	}
	return 16 << 30
}

// uidProcs is RLIMIT_NPROC of a sandboxed command that has its own
// pids.max: the build user's processes of all sandboxes together.
const uidProcs = 8 * 4096

func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	set := func(v *int64, def int64) {
		if *v <= 0 {
			*v = def
		}
	}
	set(&l.CPUSeconds, d.CPUSeconds)
	set(&l.AddressSpace, d.AddressSpace)
	set(&l.FileSize, d.FileSize)
	set(&l.Procs, d.Procs)
	set(&l.OpenFiles, d.OpenFiles)
	set(&l.Disk, d.Disk)
	set(&l.TmpSize, d.TmpSize)
	set(&l.Memory, d.Memory)
	return l
}

// Spec is one sandboxed command's view of the machine.
type Spec struct {
	// Writable directories are bound read-write at their own paths (they
	// must exist; Prepare gives them to the sandbox's uid).
	Writable []string
	// ReadOnly paths (directories or files) are bound read-only at their
	// own paths; missing ones are an error.
	ReadOnly []string
	// Network keeps the host's network (QEMU targets that need it);
	// false gives the command a network namespace with loopback only.
	Network bool
	// Devices are device nodes bound read-write (/dev/kvm).
	Devices []string
	// Dir is the working directory (inside a bound path).
	Dir    string
	Limits Limits
}

// Identity is who sandboxed commands run as.
type Identity struct {
	UID, GID int
	// Drop: patcheval runs as root and drops to UID/GID inside (setpriv);
	// otherwise the command keeps the caller's own uid in a user
	// namespace.
	Drop bool
	Name string // the user's name, or "uid N"
}

var (
	checkOnce sync.Once
	checkErr  error
	bwrapPath string
	ident     Identity
)

// Check verifies once that sandboxed commands can run here: bwrap,
// setpriv and prlimit installed and bwrap able to create its namespaces
// as the identity commands will run as. The error names what is missing.
func Check() error {
	checkOnce.Do(func() { checkErr = check() })
	return checkErr
}

func check() error {
	var missing []string
	var err error
	bwrapPath, err = exec.LookPath("bwrap")
	if err != nil {
		missing = append(missing, "bwrap (apt-get install bubblewrap)")
	}
	for _, p := range []string{"setpriv", "prlimit"} {
		if _, err := exec.LookPath(p); err != nil {
			missing = append(missing, p+" (apt-get install util-linux)")
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("sandbox: %s not installed", strings.Join(missing, ", "))
	}
	ident = identity()
	dir, err := os.MkdirTemp("", "patcheval-sandbox-check-")
	if err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	defer os.RemoveAll(dir)
	if err := Prepare(dir); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd, err := Spec{Writable: []string{dir}, Dir: dir}.Command(ctx, []string{"sh", "-c", "echo ok >probe && cat probe"})
	if err != nil {
		return err
	}
	out, err := cmd.CombinedOutput()
	Release(cmd)
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		return fmt.Errorf("sandbox: bwrap cannot create its namespaces here (%v: %s); user namespaces or root are needed",
			err, strings.TrimSpace(string(out)))
	}
	return nil
}

// identity picks who commands run as.
func identity() Identity {
	if os.Geteuid() != 0 {
		return Identity{UID: os.Getuid(), GID: os.Getgid(), Name: "uid " + strconv.Itoa(os.Getuid())}
	}
	if u, err := user.Lookup(BuildUser); err == nil {
		uid, err1 := strconv.Atoi(u.Uid)
		gid, err2 := strconv.Atoi(u.Gid)
		if err1 == nil && err2 == nil && uid != 0 {
			return Identity{UID: uid, GID: gid, Drop: true, Name: BuildUser}
		}
	}
	return Identity{UID: FallbackUID, GID: FallbackUID, Drop: true, Name: "uid " + strconv.Itoa(FallbackUID)}
}

// Who is the identity sandboxed commands run as (after Check).
func Who() Identity { return ident }

// Describe is one line for metadata and logs: the mechanism and who.
func Describe() string {
	if Disabled() {
		return "off (" + EnvSwitch + "=off)"
	}
	if Check() != nil {
		return "unavailable"
	}
	return "bwrap as " + ident.Name
}

// Prepare gives the writable directories (and everything in them) to the
// sandbox's uid, when patcheval runs as root: files the trusted side wrote
// there (.config, logs) become the build's to rewrite. Symbolic links are
// changed themselves, never followed, and files with several links are
// left alone (a hard link to a file elsewhere would otherwise give that
// file away; fs.protected_hardlinks stops the sandbox making such links).
func Prepare(dirs ...string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	if ident.UID == 0 {
		ident = identity()
	}
	for _, d := range dirs {
		err := filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
			info, err := e.Info()
			if err != nil {
				return nil
			}
			st, ok := info.Sys().(*syscall.Stat_t)
			if !ok || (int(st.Uid) == ident.UID && int(st.Gid) == ident.GID) {
				return nil
			}
			if !e.IsDir() && st.Nlink > 1 {
				return nil
			}
			if err := os.Lchown(p, ident.UID, ident.GID); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("sandbox: giving %s to %s: %w", d, ident.Name, err)
		}
	}
	return nil
}

// etcFiles are the files of /etc a toolchain and QEMU need: the dynamic
// linker's cache, Debian's alternatives (cc, ld, ...), users and groups
// (no passwords: shadow stays out), the time zone.
var etcFiles = []string{
	"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives",
	"/etc/passwd", "/etc/group", "/etc/localtime", "/etc/nsswitch.conf",
}

// Args is the bwrap command line (without the command) for the spec.
func (s Spec) Args() ([]string, error) {
	l := s.Limits.withDefaults()
	a := []string{"--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
		"--die-with-parent", "--new-session", "--hostname", "patcheval-sandbox"}
	if !s.Network {
		a = append(a, "--unshare-net")
	}
	if !ident.Drop {
		a = append(a, "--unshare-user", "--disable-userns")
	}
	a = append(a, "--ro-bind", "/usr", "/usr")
	for _, d := range []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"} {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
		case fi.Mode()&fs.ModeSymlink != 0:
			t, err := os.Readlink(d)
			if err == nil {
				a = append(a, "--symlink", t, d)
			}
		case fi.IsDir():
			a = append(a, "--ro-bind", d, d)
		}
	}
	// bwrap makes the parents of a bind's destination mode 0700 (closed
	// to the build user): they are made first, traversable and empty.
	made := map[string]bool{"/": true, "/tmp": true}
	parents := func(p string) {
		var chain []string
		for d := filepath.Dir(p); !made[d] && d != "." && d != "/"; d = filepath.Dir(d) {
			chain = append(chain, d)
		}
		for i := len(chain) - 1; i >= 0; i-- {
			a = append(a, "--perms", "0755", "--dir", chain[i])
			made[chain[i]] = true
		}
	}
	for _, f := range etcFiles {
		if _, err := os.Stat(f); err == nil {
			parents(f)
			a = append(a, "--ro-bind", f, f)
		}
	}
	a = append(a, "--proc", "/proc", "--dev", "/dev",
		"--size", strconv.FormatInt(l.TmpSize, 10), "--tmpfs", "/tmp")
	extra, err := extraReadOnly()
	if err != nil {
		return nil, err
	}
	for _, p := range append(slices.Clip(s.ReadOnly), extra...) {
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("sandbox: read-only path: %w", err)
		}
		parents(p)
		a = append(a, "--ro-bind", p, p)
		made[p] = true
	}
	for _, p := range s.Writable {
		if fi, err := os.Stat(p); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("sandbox: writable directory %s missing", p)
		}
		parents(p)
		a = append(a, "--bind", p, p)
		made[p] = true
	}
	for _, d := range s.Devices {
		a = append(a, "--dev-bind", d, d)
	}
	if s.Dir != "" {
		a = append(a, "--chdir", s.Dir)
	}
	return a, nil
}

// prefix is what runs inside bwrap before the command: the resource
// limits (set while still root, so hard limits may be set), then the drop
// to the build user.
//
// pidsBounded says the command runs in a cgroup whose pids.max is
// Limits.Procs (cgroup.go): that bound is exact, per command, while
// RLIMIT_NPROC counts every process of the build user, other sandboxes'
// too, so that one concurrent build's -j could refuse another's setuid
// (setpriv: EAGAIN). Then RLIMIT_NPROC is only the user-wide backstop,
// uidProcs.
func (s Spec) prefix(pidsBounded bool) []string {
	l := s.Limits.withDefaults()
	nproc := l.Procs
	if pidsBounded {
		nproc = max(nproc, uidProcs)
	}
	// Never above the current hard limit: only root may raise it, and an
	// unprivileged caller's prlimit would fail.
	lim := func(flag string, res int, v int64) string {
		var cur syscall.Rlimit
		if syscall.Getrlimit(res, &cur) == nil && os.Geteuid() != 0 && cur.Max != ^uint64(0) && uint64(v) > cur.Max {
			v = int64(cur.Max)
		}
		return "--" + flag + "=" + strconv.FormatInt(v, 10)
	}
	p := []string{"prlimit",
		lim("cpu", syscall.RLIMIT_CPU, l.CPUSeconds),
		lim("as", syscall.RLIMIT_AS, l.AddressSpace),
		lim("fsize", syscall.RLIMIT_FSIZE, l.FileSize),
		lim("nofile", syscall.RLIMIT_NOFILE, l.OpenFiles),
		lim("nproc", 6 /* RLIMIT_NPROC */, nproc),
		"--core=0", "--"}
	if ident.Drop {
		p = append(p, "setpriv", "--reuid="+strconv.Itoa(ident.UID), "--regid="+strconv.Itoa(ident.GID),
			"--clear-groups", "--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-all", "--no-new-privs", "--")
	}
	return p
}

// Command is exec.Command for argv inside the sandbox; the caller sets
// Env (bwrap passes it on unchanged: keep it scrubbed), Stdout, Stderr
// and ExtraFiles (inherited descriptors stay open inside), and calls
// Release once the command was waited for (its cgroup, cgroup.go).
func (s Spec) Command(ctx context.Context, argv []string) (*exec.Cmd, error) {
	if bwrapPath == "" {
		if err := Check(); err != nil {
			return nil, err
		}
	}
	a, err := s.Args()
	if err != nil {
		return nil, err
	}
	cg, err := newCgroup(s.Limits.withDefaults())
	if err != nil {
		return nil, err
	}
	full := append(append(append(a, "--"), s.prefix(cg != nil)...), argv...)
	var cmd *exec.Cmd
	if cg != nil {
		w := cg.wrap(append([]string{bwrapPath}, full...))
		cmd = exec.CommandContext(ctx, w[0], w[1:]...)
		cmdCgroups.Store(cmd, cg)
	} else {
		cmd = exec.CommandContext(ctx, bwrapPath, full...)
	}
	cmd.Dir = s.Dir
	return cmd, nil
}

// Argv is the full command line Command runs (for logs and reproducers).
func (s Spec) Argv(argv []string) ([]string, error) {
	a, err := s.Args()
	if err != nil {
		return nil, err
	}
	return append(append(append(append([]string{"bwrap"}, a...), "--"), s.prefix(false)...), argv...), nil
}

// SetCheckForTest makes Check report err (nil: works) until restore is
// called: how tests show what callers do on a machine that cannot
// sandbox.
func SetCheckForTest(err error) (restore func()) {
	Check()
	old := checkErr
	checkErr = err
	return func() { checkErr = old }
}
