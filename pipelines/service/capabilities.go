package service

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"os/exec"
	"runtime"
	"slices"
	"strings"

	"github.com/patcheval/patcheval/build"
	"github.com/patcheval/patcheval/evaluate/target/qemu"
	"github.com/patcheval/patcheval/internal/arch"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/pipelines"
)

// Capabilities are what one process can run: the kernels it can build
// (a toolchain per arch), the guests it can boot (a QEMU per arch, and
// whether KVM works), the SSH hardware targets it owns and its cores. A
// process takes jobs only from the queues its capabilities name
// (Capabilities.Queues): build-<arch>, boot-<arch>, boot-ssh-<host>.
type Capabilities struct {
	// Build are the arches whose kernels it can build.
	Build []string `json:"build"`
	// QEMU are the arches it can boot under QEMU.
	QEMU []string `json:"qemu"`
	KVM  bool     `json:"kvm"`
	// SSH are the ssh://user@host[:port] targets it owns.
	SSH   []string `json:"ssh,omitempty"`
	Cores int      `json:"cores"`
	// Coordinator: it runs the stages that need the coordinator's tree
	// and report directory (apply, more, report, notify).
	Coordinator bool `json:"coordinator,omitempty"`
}

// DetectCapabilities finds this machine's: a toolchain per arch
// (build.FindToolchain), QEMU's system emulator per arch in PATH,
// /dev/kvm, the cores; ssh are the SSH targets it owns (from its
// configuration, checked to be ssh:// URLs).
func DetectCapabilities(ctx context.Context, ssh []string) (Capabilities, error) {
	c := Capabilities{KVM: qemu.KVMUsable(), Cores: runtime.NumCPU()}
	for _, a := range arch.All() {
		if _, err := build.FindToolchain(ctx, a.Name, false); err == nil {
			c.Build = append(c.Build, a.Name)
		}
		if _, err := exec.LookPath(a.QEMU.Binary); err == nil {
			c.QEMU = append(c.QEMU, a.Name)
		}
	}
	for _, h := range ssh {
		if err := checkSSH(h); err != nil {
			return c, err
		}
		c.SSH = append(c.SSH, h)
	}
	return c, nil
}

func checkSSH(h string) error {
	u, err := url.Parse(h)
	if err != nil || u.Scheme != "ssh" || u.Hostname() == "" {
		return fail.Inputf("ssh target %q: want ssh://user@host[:port]", h)
	}
	return nil
}

// AllLocal are the capabilities of the embedded default (`patcheval
// serve` alone): every stage of every arch, as before there were
// workers. A job for a toolchain or QEMU this machine lacks fails in the
// stage with the error naming the package to install, as it always did.
func AllLocal(cores int) Capabilities {
	return Capabilities{Build: arch.Names(), QEMU: arch.Names(), Cores: cores, Coordinator: true}
}

// Queues are the River queues c takes jobs from.
func (c Capabilities) Queues() []string {
	var q []string
	if c.Coordinator {
		q = append(q, coordinatorQueues...)
	}
	for _, a := range c.Build {
		q = append(q, BuildQueue(a))
	}
	for _, a := range c.QEMU {
		q = append(q, bootQueue(a))
	}
	for _, h := range c.SSH {
		q = append(q, SSHQueue(h))
	}
	slices.Sort(q)
	return slices.Compact(q)
}

// coordinatorQueues are the stages that stay on the coordinator: apply
// writes the series into the coordinator's tree, report writes into its
// report directory, more and notify only touch the database (and the
// reporters' settings, which live with serve); watch (re-tests and
// bisection steps, issue 12) and series (per-patch runs and bisections
// inside a series, issue 21) work in the coordinator's trees.
var coordinatorQueues = []string{QueueApply, QueueMore, QueueReport, QueueWatch, QueueSeries}

// BuildQueue is the queue of arch's kernel builds.
func BuildQueue(a string) string { return QueueBuild + "-" + queuePart(a) }

func bootQueue(a string) string { return QueueBoot + "-" + queuePart(a) }

// SSHQueue is the queue of boots on SSH target host (ssh://user@host:port):
// boot-ssh-<host>, with the user and port when given, in River's queue
// alphabet; a name too long ends in a hash of the URL.
func SSHQueue(host string) string {
	name := host
	if u, err := url.Parse(host); err == nil && u.Host != "" {
		name = u.Host
		if u.User != nil {
			name = u.User.Username() + "-" + name
		}
	}
	q := QueueBoot + "-ssh-" + queuePart(name)
	if len(q) > 64 {
		sum := sha256.Sum256([]byte(host))
		q = q[:64-13] + "-" + hex.EncodeToString(sum[:6])
	}
	return q
}

// BootQueue is the queue of a planned boot: boot-ssh-<host> on an SSH
// target, else boot-<arch>.
func BootQueue(bp pipelines.BootPlan) string {
	if bp.Target.Kind == "ssh" {
		return SSHQueue(bp.Target.Host)
	}
	return bootQueue(bp.Arch)
}

// queuePart is s in River's queue alphabet: lower-case letters and digits
// separated by single '-'.
func queuePart(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = false
			b.WriteRune(r)
			continue
		}
		dash = true
	}
	return b.String()
}

// queueNeeds says what a worker needs to take jobs from queue q, for the
// dashboard's "waiting" reason.
func queueNeeds(q string) string {
	switch {
	case slices.Contains(coordinatorQueues, q):
		return "the coordinator (patcheval serve) runs this stage"
	case strings.HasPrefix(q, QueueBoot+"-ssh-"):
		return "a worker that owns this SSH target (patcheval worker --ssh-target)"
	case strings.HasPrefix(q, QueueBuild+"-"):
		a := strings.TrimPrefix(q, QueueBuild+"-")
		if ai, ok := archByQueuePart(a); ok {
			return "a worker with the " + ai.Name + " cross compiler (" + ai.CrossPkg + ")"
		}
	case strings.HasPrefix(q, QueueBoot+"-"):
		a := strings.TrimPrefix(q, QueueBoot+"-")
		if ai, ok := archByQueuePart(a); ok {
			return "a worker with " + ai.QEMU.Binary + " (boots " + ai.Name + ")"
		}
	}
	return "a worker that takes queue " + q
}

func archByQueuePart(p string) (arch.Arch, bool) {
	for _, a := range arch.All() {
		if queuePart(a.Name) == p {
			return a, true
		}
	}
	return arch.Arch{}, false
}
