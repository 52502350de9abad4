package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The aggregate bound: RLIMIT_AS bounds each process, not a tree of them
// (a -j64 make, or a fork of hungry children). When patcheval runs as
// root and the machine has a writable cgroup hierarchy, every sandboxed
// command runs in a cgroup of its own, a child of patcheval's own cgroup,
// with memory.max (cgroup v2; memory.limit_in_bytes and, with swap
// accounting, memory.memsw.limit_in_bytes on v1) of Limits.Memory and
// pids.max of Limits.Procs: the kernel's OOM killer ends the command's
// processes when together they pass the bound, and Release names it. The
// command enters its cgroup before bwrap starts (a root shell writes its
// own pid to cgroup.procs, then execs bwrap), so every process of the
// sandbox is born inside. Otherwise the command runs without the
// aggregate bound and Aggregate says why (recorded with the build).

const cgroupRoot = "/sys/fs/cgroup"

// cgroupSetup is how this machine bounds a command's tree, found once.
type cgroupSetup struct {
	version int               // 2, 1, or 0 (none)
	parents map[string]string // controller ("memory", "pids"; "" on v2) -> the directory new cgroups go under
	note    string            // why there is none
}

var (
	cgOnce  sync.Once
	cgState cgroupSetup
	cgSeq   atomic.Int64
)

func cgroups() cgroupSetup {
	cgOnce.Do(func() { cgState = detectCgroups() })
	return cgState
}

// ownCgroups reads /proc/self/cgroup: controller list -> path.
func ownCgroups() (map[string]string, error) {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" {
			out[""] = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			out[c] = parts[2]
		}
	}
	return out, sc.Err()
}

func detectCgroups() cgroupSetup {
	if os.Geteuid() != 0 {
		return cgroupSetup{note: "no aggregate memory bound: patcheval does not run as root (cgroups not writable); each process has RLIMIT_AS only"}
	}
	own, err := ownCgroups()
	if err != nil {
		return cgroupSetup{note: "no aggregate memory bound: " + err.Error()}
	}
	var st syscall.Statfs_t
	if syscall.Statfs(cgroupRoot, &st) == nil && st.Type == 0x63677270 { // CGROUP2_SUPER_MAGIC
		parent := filepath.Join(cgroupRoot, own[""])
		ctrls, err := os.ReadFile(filepath.Join(parent, "cgroup.controllers"))
		if err != nil || !strings.Contains(" "+string(ctrls)+" ", " memory ") || !strings.Contains(" "+strings.TrimSpace(string(ctrls))+" ", " pids ") {
			return cgroupSetup{note: fmt.Sprintf("no aggregate memory bound: cgroup v2 %s does not offer the memory and pids controllers (%q)", parent, strings.TrimSpace(string(ctrls)))}
		}
		sub, _ := os.ReadFile(filepath.Join(parent, "cgroup.subtree_control"))
		if !strings.Contains(" "+strings.TrimSpace(string(sub))+" ", " memory ") || !strings.Contains(" "+strings.TrimSpace(string(sub))+" ", " pids ") {
			if err := os.WriteFile(filepath.Join(parent, "cgroup.subtree_control"), []byte("+memory +pids"), 0); err != nil {
				return cgroupSetup{note: fmt.Sprintf("no aggregate memory bound: cannot enable memory and pids for the children of cgroup v2 %s: %v "+
					"(a cgroup holding processes cannot: run patcheval in a cgroup of its own, e.g. systemd-run --scope)", parent, err)}
			}
		}
		return cgroupSetup{version: 2, parents: map[string]string{"": parent}}
	}
	s := cgroupSetup{version: 1, parents: map[string]string{}}
	for _, c := range []string{"memory", "pids"} {
		p, ok := own[c]
		dir := filepath.Join(cgroupRoot, c, p)
		if _, err := os.Stat(filepath.Join(dir, "cgroup.procs")); !ok || err != nil {
			return cgroupSetup{note: fmt.Sprintf("no aggregate memory bound: no writable cgroup v2 at %s and no cgroup v1 %s controller at %s", cgroupRoot, c, dir)}
		}
		s.parents[c] = dir
	}
	return s
}

// cgroup is one command's.
type cgroup struct {
	dirs  []string // v2: one; v1: memory's, pids'
	limit int64
	v     int
}

// MemoryError says that a sandboxed command's processes together passed
// the memory bound and the kernel's OOM killer ended them.
type MemoryError struct {
	Limit int64
	Kills int
}

func (e *MemoryError) Error() string {
	return fmt.Sprintf("sandbox: the build's processes together used more than the memory limit of %d MiB (%d killed by the OOM killer)",
		e.Limit>>20, e.Kills)
}

// newCgroup makes the command's cgroup with l's bounds (nil, with the
// setup's note, when the machine has none).
func newCgroup(l Limits) (*cgroup, error) {
	s := cgroups()
	if s.version == 0 {
		return nil, nil
	}
	name := fmt.Sprintf("patcheval-sandbox-%d-%d", os.Getpid(), cgSeq.Add(1))
	cg := &cgroup{limit: l.Memory, v: s.version}
	write := func(dir, file, v string) error {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(v), 0); err != nil {
			return fmt.Errorf("sandbox: cgroup %s: %w", filepath.Join(dir, file), err)
		}
		return nil
	}
	mk := func(parent string) (string, error) {
		sweep(parent)
		d := filepath.Join(parent, name)
		if err := os.Mkdir(d, 0o755); err != nil {
			return "", fmt.Errorf("sandbox: making cgroup %s: %w", d, err)
		}
		cg.dirs = append(cg.dirs, d)
		return d, nil
	}
	var err error
	if s.version == 2 {
		var d string
		if d, err = mk(s.parents[""]); err == nil {
			if err = write(d, "memory.max", strconv.FormatInt(l.Memory, 10)); err == nil {
				if err = write(d, "memory.swap.max", "0"); errors.Is(err, os.ErrNotExist) {
					err = nil
				}
			}
			if err == nil {
				err = write(d, "pids.max", strconv.FormatInt(l.Procs, 10))
			}
		}
	} else {
		var m, p string
		if m, err = mk(s.parents["memory"]); err == nil {
			if err = write(m, "memory.limit_in_bytes", strconv.FormatInt(l.Memory, 10)); err == nil {
				if _, serr := os.Stat(filepath.Join(m, "memory.memsw.limit_in_bytes")); serr == nil {
					err = write(m, "memory.memsw.limit_in_bytes", strconv.FormatInt(l.Memory, 10))
				}
			}
		}
		if err == nil {
			if p, err = mk(s.parents["pids"]); err == nil {
				err = write(p, "pids.max", strconv.FormatInt(l.Procs, 10))
			}
		}
	}
	if err != nil {
		cg.remove()
		return nil, err
	}
	return cg, nil
}

// sweep removes the cgroups under parent left by sandboxes whose
// process is gone (a caller that died before Release). A cgroup of a
// living process is never touched, empty or not: between newCgroup and
// the command's shell writing its pid, a cgroup is empty and in use, and
// removing it then (another test process's or another goroutine's
// sweep) failed that command (exit 125 from wrap).
func sweep(parent string) {
	ents, _ := os.ReadDir(parent)
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		if pid, ok := cgroupOwner(e.Name()); ok && pid != os.Getpid() && syscall.Kill(pid, 0) == syscall.ESRCH {
			os.Remove(filepath.Join(parent, e.Name())) // fails while processes remain
		}
	}
}

// cgroupOwner is the pid of the process that made the sandbox cgroup
// named name ("patcheval-sandbox-PID-SEQ").
func cgroupOwner(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, "patcheval-sandbox-")
	if !ok {
		return 0, false
	}
	pidText, _, ok := strings.Cut(rest, "-")
	pid, err := strconv.Atoi(pidText)
	if !ok || err != nil || pid <= 0 {
		return 0, false
	}
	return pid, true
}

// wrap is argv entered into the cgroup first: a root shell writes its
// pid into each cgroup.procs, then execs argv.
func (cg *cgroup) wrap(argv []string) []string {
	w := []string{"/bin/sh", "-c", `while [ "$1" != -- ]; do echo $$ >"$1" || { echo "patcheval sandbox: cannot enter cgroup $1" >&2; exit 125; }; shift; done; shift; exec "$@"`, "sh"}
	for _, d := range cg.dirs {
		w = append(w, filepath.Join(d, "cgroup.procs"))
	}
	return append(append(w, "--"), argv...)
}

// procs are the processes left in the cgroup.
func (cg *cgroup) procs() []int {
	var out []int
	for _, d := range cg.dirs {
		data, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil {
				out = append(out, pid)
			}
		}
	}
	return out
}

// oomKills is how many of the cgroup's processes the OOM killer ended.
func (cg *cgroup) oomKills() int {
	if len(cg.dirs) == 0 {
		return 0
	}
	file := "memory.events"
	if cg.v == 1 {
		file = "memory.oom_control"
	}
	data, _ := os.ReadFile(filepath.Join(cg.dirs[0], file))
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "oom_kill" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	return 0
}

// remove kills what is left in the cgroup and removes it.
func (cg *cgroup) remove() {
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		ps := cg.procs()
		if len(ps) == 0 || time.Now().After(end) {
			break
		}
		for _, p := range ps {
			syscall.Kill(p, syscall.SIGKILL)
		}
	}
	for i := len(cg.dirs) - 1; i >= 0; i-- {
		os.Remove(cg.dirs[i])
	}
}

var cmdCgroups sync.Map // *exec.Cmd -> *cgroup

// Release ends cmd's aggregate bound once cmd has been waited for: what
// is left of its processes is killed and its cgroup removed. It returns a
// *MemoryError when the OOM killer ended processes of cmd (the command
// then failed for that reason), else nil. Commands without a cgroup
// release nothing.
func Release(cmd *exec.Cmd) error {
	v, ok := cmdCgroups.LoadAndDelete(cmd)
	if !ok {
		return nil
	}
	cg := v.(*cgroup)
	kills := cg.oomKills()
	cg.remove()
	if kills > 0 {
		return &MemoryError{Limit: cg.limit, Kills: kills}
	}
	return nil
}

// Aggregate says, for the isolation record, whether commands run under
// an aggregate memory and process bound, and how (or why not).
func Aggregate(l Limits) string {
	l = l.withDefaults()
	s := cgroups()
	switch s.version {
	case 2:
		return fmt.Sprintf("cgroup v2: memory.max %d MiB, pids.max %d per command", l.Memory>>20, l.Procs)
	case 1:
		return fmt.Sprintf("cgroup v1: memory limit %d MiB, pids.max %d per command", l.Memory>>20, l.Procs)
	}
	return s.note
}
