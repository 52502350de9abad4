//go:build linux

package guest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

// Default loop counts per iteration.
var defaultOps = map[string]int{
	BenchKill:      200000,
	BenchKillChild: 100000,
	BenchGetppid:   200000,
	BenchGetpgid:   200000,
	BenchFork:      500,
	BenchExecve:    100,
	BenchBridge:    50,
}

// RunBench runs one benchmark iteration in the calling process.
func RunBench(b Bench) (*Result, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	n := b.Ops
	if n <= 0 {
		n = defaultOps[b.Name]
	}
	var (
		res *Result
		err error
	)
	switch b.Name {
	case BenchKill:
		res, err = loop(n, func() error {
			return syscall.Kill(pid(), 0)
		})
	case BenchKillChild:
		res, err = killChild(n)
	case BenchGetppid:
		res, err = loop(n, func() error {
			syscall.RawSyscall(syscall.SYS_GETPPID, 0, 0, 0)
			return nil
		})
	case BenchGetpgid:
		res, err = loop(n, func() error {
			if _, _, e := syscall.RawSyscall(syscall.SYS_GETPGID, 0, 0, 0); e != 0 {
				return e
			}
			return nil
		})
	case BenchFork:
		res, err = loop(n, forkWait)
	case BenchExecve:
		res, err = execve(n)
	case BenchRCU:
		res, err = rcu(b.Runs, b.Calls)
	case BenchBridge:
		if os.Getpid() == 1 {
			res, err = bridge(n)
		} else {
			res, err = ownNetns(func() (*Result, error) { return bridge(n) })
		}
	case BenchStressNG, BenchPerfBench:
		res, err = runTool(b)
		if res != nil {
			res.Benchmark = b.Label()
		}
		return res, err
	default:
		return nil, fmt.Errorf("unknown benchmark %q", b.Name)
	}
	if res != nil {
		res.Benchmark = b.Name
	}
	return res, err
}

var thePID = os.Getpid()

func pid() int { return thePID }

// loop times n calls of op.
func loop(n int, op func() error) (*Result, error) {
	start := time.Now()
	for i := 0; i < n; i++ {
		if err := op(); err != nil {
			return nil, fmt.Errorf("op %d: %w", i, err)
		}
	}
	return finish(int64(n), time.Since(start)), nil
}

func finish(n int64, d time.Duration) *Result {
	r := &Result{Iterations: n, DurationNS: d.Nanoseconds()}
	if n > 0 && d > 0 {
		r.NsPerOp = float64(d.Nanoseconds()) / float64(n)
		r.OpsPerSec = float64(n) / d.Seconds()
	}
	return r
}

func self() (string, error) {
	if p, err := os.Executable(); err == nil {
		return p, nil
	}
	if os.Getpid() == 1 {
		return "/init", nil
	}
	return "", errors.New("cannot find the agent's own executable")
}

// killChild times kill(child, SIGUSR1) to a child that ignores SIGUSR1:
// every kill() goes through the permission checks (security_task_kill)
// and the signal's generation for another process, which drops it as
// ignored; nothing is delivered and no handler runs. It approximates
// stress-ng's kill stressor, it is not it (Describe).
func killChild(n int) (*Result, error) {
	exe, err := self()
	if err != nil {
		return nil, err
	}
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC); err != nil {
		return nil, err
	}
	child, err := syscall.ForkExec(exe, []string{exe, SigChildFlag}, &syscall.ProcAttr{
		Env:   []string{},
		Files: []uintptr{0, 1, 2, uintptr(p[1])},
	})
	syscall.Close(p[1])
	if err != nil {
		syscall.Close(p[0])
		return nil, fmt.Errorf("starting the signal child %s: %w", exe, err)
	}
	defer func() {
		syscall.Kill(child, syscall.SIGKILL)
		var ws syscall.WaitStatus
		syscall.Wait4(child, &ws, 0, nil)
	}()
	buf := make([]byte, 1)
	nr, err := syscall.Read(p[0], buf)
	syscall.Close(p[0])
	if nr != 1 {
		return nil, fmt.Errorf("signal child did not start: %v", err)
	}
	return loop(n, func() error { return syscall.Kill(child, syscall.SIGUSR1) })
}

func ignoreSIGUSR1() { signal.Ignore(syscall.SIGUSR1) }

// rawFork forks with clone(SIGCHLD); the child exits at once without
// touching the Go runtime.
//
//go:nosplit
func rawFork() (uintptr, syscall.Errno) {
	r, _, e := syscall.RawSyscall6(syscall.SYS_CLONE, uintptr(syscall.SIGCHLD), 0, 0, 0, 0, 0)
	if e == 0 && r == 0 {
		syscall.RawSyscall(syscall.SYS_EXIT_GROUP, 0, 0, 0)
	}
	return r, e
}

func forkWait() error {
	syscall.ForkLock.Lock()
	p, e := rawFork()
	syscall.ForkLock.Unlock()
	if e != 0 {
		return fmt.Errorf("fork: %w", e)
	}
	var ws syscall.WaitStatus
	_, err := syscall.Wait4(int(p), &ws, 0, nil)
	return err
}

func execve(n int) (*Result, error) {
	exe, err := self()
	if err != nil {
		return nil, err
	}
	argv := []string{exe, ExitFlag}
	attr := &syscall.ProcAttr{Env: []string{}, Files: []uintptr{0, 1, 2}}
	return loop(n, func() error {
		p, err := syscall.ForkExec(exe, argv, attr)
		if err != nil {
			return fmt.Errorf("execve %s: %w", exe, err)
		}
		var ws syscall.WaitStatus
		if _, err := syscall.Wait4(p, &ws, 0, nil); err != nil {
			return err
		}
		if !ws.Exited() || ws.ExitStatus() != 0 {
			return fmt.Errorf("%s %s exited with %v", exe, ExitFlag, ws)
		}
		return nil
	})
}

// membarrier system call numbers (not in package syscall).
var sysMembarrier = map[string]uintptr{
	"amd64": 324, "arm64": 283, "ppc64le": 365, "ppc64": 365, "riscv64": 283, "s390x": 356, "386": 375, "arm": 389,
}

const (
	membarrierCmdQuery  = 0
	membarrierCmdGlobal = 1
)

// rcu times membarrier(MEMBARRIER_CMD_GLOBAL), which is synchronize_rcu()
// when more than one CPU is online: runs x calls, each call timed.
func rcu(runs, calls int) (*Result, error) {
	if runs <= 0 {
		runs = 10
	}
	if calls <= 0 {
		calls = 100
	}
	nr, ok := sysMembarrier[runtime.GOARCH]
	if !ok {
		return &Result{Skipped: "membarrier number unknown on " + runtime.GOARCH}, nil
	}
	mask, _, e := syscall.RawSyscall(nr, membarrierCmdQuery, 0, 0)
	if e != 0 {
		return &Result{Skipped: fmt.Sprintf("no membarrier (%v): kernel without CONFIG_MEMBARRIER", e)}, nil
	}
	if mask&membarrierCmdGlobal == 0 {
		return &Result{Skipped: "membarrier without MEMBARRIER_CMD_GLOBAL (nohz_full?)"}, nil
	}
	r := &Result{}
	var total time.Duration
	for run := 0; run < runs; run++ {
		st := RunStat{Calls: calls, MinNS: math.Inf(1)}
		var sum float64
		for i := 0; i < calls; i++ {
			t0 := time.Now()
			if _, _, e := syscall.Syscall(nr, membarrierCmdGlobal, 0, 0); e != 0 {
				return nil, fmt.Errorf("membarrier(MEMBARRIER_CMD_GLOBAL): %w", e)
			}
			d := time.Since(t0)
			total += d
			ns := float64(d.Nanoseconds())
			sum += ns
			st.MinNS = math.Min(st.MinNS, ns)
			st.MaxNS = math.Max(st.MaxNS, ns)
		}
		st.MeanNS = sum / float64(calls)
		r.Runs = append(r.Runs, st)
	}
	f := finish(int64(runs*calls), total)
	f.Runs = r.Runs
	return f, nil
}

// pinAll sets the CPU affinity of every thread of the agent, like
// taskset -c; threads and children created later inherit it.
func pinAll(cpus string) error {
	set, err := ParseCPUs(cpus)
	if err != nil {
		return err
	}
	words := make([]uint64, 16)
	for _, c := range set {
		if c >= 64*len(words) {
			return fmt.Errorf("cpu list %q: cpu %d too large", cpus, c)
		}
		words[c/64] |= 1 << (c % 64)
	}
	tasks, err := listDir("/proc/self/task")
	if err != nil {
		return fmt.Errorf("pinning to cpus %s: %w", cpus, err)
	}
	for _, t := range tasks {
		tid, _ := strconv.Atoi(t)
		_, _, e := syscall.RawSyscall(syscall.SYS_SCHED_SETAFFINITY, uintptr(tid), uintptr(len(words)*8), uintptr(unsafe.Pointer(&words[0])))
		if e != 0 && e != syscall.ESRCH {
			return fmt.Errorf("sched_setaffinity(%d, %s): %w", tid, cpus, e)
		}
	}
	return nil
}

// ParseCPUs parses a taskset -c list: "0-3,6".
func ParseCPUs(s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("cpu list %q: bad cpu %q", s, part)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("cpu list %q: bad range %q", s, part)
			}
		}
		for c := a; c <= b; c++ {
			out = append(out, c)
		}
	}
	return out, nil
}

// bridgeAddr is the address the thread's bridge.sh gives its bridge
// ("ifconfig virbr0 192.0.0.1 up").
var bridgeAddr = [4]byte{192, 0, 0, 1}

// bridge runs seed 003's bridge.sh n times: add a bridge (brctl addbr,
// here RTM_NEWLINK kind bridge), give it an address and bring it up
// (ifconfig ADDR up), set the address again and bring it down (ifconfig
// ADDR down), delete it (brctl delbr, RTM_DELLINK). Bringing it down
// and unregistering it wait for RCU grace periods (synchronize_net).
func bridge(n int) (*Result, error) {
	fd, err := syscall.Socket(syscall.AF_NETLINK, syscall.SOCK_RAW|syscall.SOCK_CLOEXEC, syscall.NETLINK_ROUTE)
	if err != nil {
		return &Result{Skipped: fmt.Sprintf("no bridge support: netlink socket: %v", err)}, nil
	}
	defer syscall.Close(fd)
	if err := syscall.Bind(fd, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK}); err != nil {
		return nil, fmt.Errorf("binding netlink socket: %w", err)
	}
	// ifconfig's socket for its SIOCSIF* ioctls.
	inet, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return &Result{Skipped: fmt.Sprintf("no bridge loop: an AF_INET socket for ifconfig's ioctls: %v", err)}, nil
	}
	defer syscall.Close(inet)
	name := fmt.Sprintf("pebr%d", os.Getpid()%100000)
	seq := uint32(0)
	do := func(typ uint16, flags uint16, attrs []byte) error {
		seq++
		return nlRequest(fd, seq, typ, flags, attrs)
	}
	ifname := nlAttr(syscall.IFLA_IFNAME, append([]byte(name), 0))
	linkinfo := nlAttr(18 /* IFLA_LINKINFO */, nlAttr(1 /* IFLA_INFO_KIND */, []byte("bridge\x00")))
	add := func() error {
		return do(syscall.RTM_NEWLINK, syscall.NLM_F_CREATE|syscall.NLM_F_EXCL, append(append([]byte{}, ifname...), linkinfo...))
	}
	del := func() error { return do(syscall.RTM_DELLINK, 0, ifname) }
	// ifconfig NAME ADDR up|down: SIOCSIFADDR, then SIOCGIFFLAGS and
	// SIOCSIFFLAGS with IFF_UP|IFF_RUNNING set or IFF_UP cleared.
	ifconfig := func(up bool) error {
		if err := ifAddr(inet, name, bridgeAddr); err != nil {
			return fmt.Errorf("ifconfig %s %d.%d.%d.%d: %w", name, bridgeAddr[0], bridgeAddr[1], bridgeAddr[2], bridgeAddr[3], err)
		}
		if err := ifUp(inet, name, up); err != nil {
			return fmt.Errorf("ifconfig %s up=%v: %w", name, up, err)
		}
		return nil
	}
	once := func() error {
		if err := add(); err != nil {
			return fmt.Errorf("adding bridge %s: %w", name, err)
		}
		if err := ifconfig(true); err != nil {
			return err
		}
		if err := ifconfig(false); err != nil {
			return err
		}
		if err := del(); err != nil {
			return fmt.Errorf("deleting bridge %s: %w", name, err)
		}
		return nil
	}
	if err := add(); err != nil {
		if errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.EAFNOSUPPORT) || errors.Is(err, syscall.EPROTONOSUPPORT) {
			return &Result{Skipped: fmt.Sprintf("no bridge support: %v", err)}, nil
		}
		if errors.Is(err, syscall.EPERM) {
			return &Result{Skipped: fmt.Sprintf("bridge: not permitted (needs CAP_NET_ADMIN): %v", err)}, nil
		}
		return nil, fmt.Errorf("adding bridge %s: %w", name, err)
	}
	if err := del(); err != nil {
		return nil, fmt.Errorf("deleting bridge %s: %w", name, err)
	}
	// The thread timed its loop with time(1) and asked about its sys
	// time: the calling thread's user and system time go along.
	var ru0, ru1 syscall.Rusage
	syscall.Getrusage(rusageThread, &ru0)
	res, err := loop(n, once)
	if err == nil && syscall.Getrusage(rusageThread, &ru1) == nil {
		res.Counters = map[string]float64{
			CounterSysNS:  float64(ru1.Stime.Nano() - ru0.Stime.Nano()),
			CounterUserNS: float64(ru1.Utime.Nano() - ru0.Utime.Nano()),
		}
	}
	return res, err
}

// ownNetns runs f on a thread of its own in a new network namespace, so
// that a loop which configures network devices never touches the
// running system's (no-init mode: the agent on an SSH target or a
// host). The thread stays locked and ends with its goroutine: it never
// runs anything else. Without namespaces (or the right to make one) the
// benchmark is skipped.
func ownNetns(f func() (*Result, error)) (*Result, error) {
	type out struct {
		res *Result
		err error
	}
	ch := make(chan out, 1)
	go func() {
		runtime.LockOSThread()
		if err := syscall.Unshare(syscall.CLONE_NEWNET); err != nil {
			ch <- out{res: &Result{Skipped: fmt.Sprintf("no network namespace of its own (unshare: %v): on a running system the loop never configures the host's network", err)}}
			return
		}
		res, err := f()
		ch <- out{res, err}
	}()
	o := <-ch
	return o.res, o.err
}

// ifreq is struct ifreq: the interface name, then a union of 24 bytes
// (an address, or the flags as a short).
type ifreq struct {
	name [syscall.IFNAMSIZ]byte
	data [24]byte
}

func newIfreq(name string) *ifreq {
	r := &ifreq{}
	copy(r.name[:syscall.IFNAMSIZ-1], name)
	return r
}

func ioctlIfreq(fd int, req uintptr, r *ifreq) error {
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), req, uintptr(unsafe.Pointer(r))); e != 0 {
		return e
	}
	return nil
}

// ifAddr sets the IPv4 address of interface name (SIOCSIFADDR).
func ifAddr(fd int, name string, addr [4]byte) error {
	r := newIfreq(name)
	binary.NativeEndian.PutUint16(r.data[0:], syscall.AF_INET) // sockaddr_in: family, port 0, address
	copy(r.data[4:8], addr[:])
	return ioctlIfreq(fd, syscall.SIOCSIFADDR, r)
}

// ifUp brings interface name up (IFF_UP|IFF_RUNNING, as ifconfig does)
// or down (SIOCGIFFLAGS, SIOCSIFFLAGS).
func ifUp(fd int, name string, up bool) error {
	r := newIfreq(name)
	if err := ioctlIfreq(fd, syscall.SIOCGIFFLAGS, r); err != nil {
		return err
	}
	flags := binary.NativeEndian.Uint16(r.data[0:])
	if up {
		flags |= syscall.IFF_UP | syscall.IFF_RUNNING
	} else {
		flags &^= syscall.IFF_UP
	}
	binary.NativeEndian.PutUint16(r.data[0:], flags)
	return ioctlIfreq(fd, syscall.SIOCSIFFLAGS, r)
}

// rusageThread is RUSAGE_THREAD: the agent's benchmarks run on one
// locked OS thread.
const rusageThread = 1

func nlAttr(typ uint16, data []byte) []byte {
	l := 4 + len(data)
	b := make([]byte, (l+3)&^3)
	binary.NativeEndian.PutUint16(b[0:], uint16(l))
	binary.NativeEndian.PutUint16(b[2:], typ)
	copy(b[4:], data)
	return b
}

// nlRequest sends one rtnetlink link request with NLM_F_ACK and waits
// for the acknowledgement.
func nlRequest(fd int, seq uint32, typ, flags uint16, attrs []byte) error {
	const hdr = syscall.SizeofNlMsghdr + syscall.SizeofIfInfomsg
	msg := make([]byte, hdr+len(attrs))
	binary.NativeEndian.PutUint32(msg[0:], uint32(len(msg)))
	binary.NativeEndian.PutUint16(msg[4:], typ)
	binary.NativeEndian.PutUint16(msg[6:], flags|syscall.NLM_F_REQUEST|syscall.NLM_F_ACK)
	binary.NativeEndian.PutUint32(msg[8:], seq)
	// ifinfomsg: family AF_UNSPEC, everything zero.
	copy(msg[hdr:], attrs)
	if err := syscall.Sendto(fd, msg, 0, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK}); err != nil {
		return err
	}
	buf := make([]byte, 8192)
	for {
		n, _, err := syscall.Recvfrom(fd, buf, 0)
		if err != nil {
			return err
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return err
		}
		for _, m := range msgs {
			if m.Header.Seq != seq || m.Header.Type != syscall.NLMSG_ERROR {
				continue
			}
			if len(m.Data) < 4 {
				return errors.New("short netlink error message")
			}
			if code := int32(binary.NativeEndian.Uint32(m.Data)); code != 0 {
				return syscall.Errno(-code)
			}
			return nil
		}
	}
}
