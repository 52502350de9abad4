// Package evaluate boots kernels (QEMU, or hardware over SSH), runs
// benchmarks inside them through the guest agent, stores every sample with
// its environment, compares variants with statistics and renders reports.
//
// The one boot path: Run boots a list of PlannedBoot (Interleave plans
// them for `patcheval run`; the pipeline runner plans them from a
// pipeline) on a Target that evaluate/target.New makes, and hands each
// boot to a Recorder (pipelines/store's BootRecorder) before the next
// starts, skipping the boots it has already finished.
//
// Sub-packages: target (New: the one target constructor), qemu and ssh
// (the targets), agent (the guest /init program), guest (its plan and
// output), initramfs (newc cpio writer), userland (the guest's tools),
// store (SQLite), stats, report (rendering), mail and reporters
// (delivery).
package evaluate

import "time"

// Kernel is what a target boots: a built kernel image for one variant.
type Kernel struct {
	Variant    string `json:"variant"`
	Arch       string `json:"arch"` // ppc64le, arm64, x86_64
	Image      string `json:"image"`
	SystemMap  string `json:"system_map,omitempty"`
	Config     string `json:"config,omitempty"` // path of the final .config
	ConfigHash string `json:"config_hash,omitempty"`
	Commit     string `json:"commit,omitempty"`
	// Cmdline is extra kernel command line for this variant
	// ("selinux=0 enforcing=0 preempt=full").
	Cmdline string `json:"cmdline,omitempty"`
	// BuildID is the GNU build-id of the kernel's vmlinux (hex), recorded
	// at build time: a boot is only measured once the running kernel shows
	// the same in /sys/kernel/notes (Verify). "" when unknown (an image
	// given by path that is not ELF, an artifact from before build-ids).
	BuildID string `json:"build_id,omitempty"`
}

// Sample is one measured value.
type Sample struct {
	Variant   string  `json:"variant"`
	Benchmark string  `json:"benchmark"` // "kill", "getppid", ...
	Metric    string  `json:"metric"`    // "ns/op", "ops/s", "latency_us", ...
	Value     float64 `json:"value"`
	Unit      string  `json:"unit"`
	// HigherIsBetter is the metric's direction.
	HigherIsBetter bool `json:"higher_is_better"`
	Boot           int  `json:"boot"`      // boot number within the variant
	Iteration      int  `json:"iteration"` // iteration within the boot
	// Extra holds additional per-sample values (min/max of an inner loop,
	// iterations, duration).
	Extra map[string]float64 `json:"extra,omitempty"`
	Time  time.Time          `json:"time"`
	// Deterministic says the sample was measured under QEMU -icount
	// (timings are functions of executed instructions, not wall time).
	Deterministic bool `json:"deterministic,omitempty"`
	// BuildID is the GNU build-id of the kernel the sample ran on, as
	// the running kernel showed it (/sys/kernel/notes).
	BuildID string `json:"build_id,omitempty"`
}

// BootInitramfs stands in Environment.QEMUArgs for the initramfs a QEMU
// boot ran with: a file patcheval writes for each boot (the guest agent
// as /init, the boot's plan, the userland archive) and removes when the
// boot ends, so that the recorded command line names no file that is
// gone. A reproducer's qemu.txt gives it as "$INITRAMFS".
const BootInitramfs = "$INITRAMFS"

// Environment records what a run ran on.
type Environment struct {
	KernelRelease string   `json:"kernel_release,omitempty"`
	ConfigHash    string   `json:"config_hash,omitempty"`
	Cmdline       string   `json:"cmdline,omitempty"`
	Target        string   `json:"target"` // "qemu", "ssh://user@host"
	QEMUArgs      []string `json:"qemu_args,omitempty"`
	Host          string   `json:"host,omitempty"`
	AgentVersion  string   `json:"agent_version,omitempty"`
	Deterministic bool     `json:"deterministic"`
	KVM           bool     `json:"kvm"`
	// PerfEvents is which perf events the guest's kernel counts, as the
	// agent probed them (guest.PerfEvents.String()).
	PerfEvents string `json:"perf_events,omitempty"`
	// BuildID is the GNU build-id the running kernel showed
	// (/sys/kernel/notes); Verified says it and the command line were
	// checked against the kernel asked for (Verify) before any sample.
	BuildID  string `json:"build_id,omitempty"`
	Verified bool   `json:"verified,omitempty"`
}
