package pipelines

// raw* mirror the file format; see README.md.
type rawPipeline struct {
	Name          string          `toml:"name"`
	Description   string          `toml:"description"`
	Deterministic bool            `toml:"deterministic"`
	Tree          rawTree         `toml:"tree"`
	Series        rawSeries       `toml:"series"`
	Build         rawBuild        `toml:"build"`
	Variant       []rawVariant    `toml:"variant"`
	Benchmark     []rawBenchmark  `toml:"benchmark"`
	Repeats       rawRepeats      `toml:"repeats"`
	Compare       rawCompare      `toml:"compare"`
	Target        rawTarget       `toml:"target"`
	Comparison    []rawComparison `toml:"comparison"`
	Chain         []rawChain      `toml:"chain"`
	SELinux       rawSELinux      `toml:"selinux"`
	Table         []rawTable      `toml:"table"`
}

type rawSELinux struct {
	Policy string `toml:"policy"`
}

type rawTable struct {
	Name       string    `toml:"name"`
	Columns    []string  `toml:"columns"`
	Benchmarks []string  `toml:"benchmarks"`
	Change     rawChange `toml:"change"`
}

type rawChange struct {
	Name  string `toml:"name"`
	Base  string `toml:"base"`
	Other string `toml:"other"`
}

type rawTree struct {
	Path string `toml:"path"`
	Base string `toml:"base"`
}

type rawSeries struct {
	MsgID string `toml:"msgid"`
	Apply *bool  `toml:"apply"`
}

type rawBuild struct {
	Arch      any            `toml:"arch"` // "ppc64le" or ["ppc64le", ...]
	Config    string         `toml:"config"`
	Fragments []string       `toml:"fragments"`
	Symbols   map[string]any `toml:"symbols"`
}

type rawVariant struct {
	Name         string         `toml:"name"`
	Description  string         `toml:"description"`
	Kernel       string         `toml:"kernel"`
	ApplySeries  *bool          `toml:"apply_series"`
	Symbols      map[string]any `toml:"symbols"`
	Cmdline      string         `toml:"cmdline"`
	SchedPreempt string         `toml:"sched_preempt"`
	Sysctls      map[string]any `toml:"sysctls"`
	CPUs         string         `toml:"cpus"`
	SELinux      string         `toml:"selinux"`
	Ref          string         `toml:"ref"`
	Revert       []string       `toml:"revert"`
}

type rawBenchmark struct {
	Name       string   `toml:"name"`
	Args       []string `toml:"args"`
	Iterations *int     `toml:"iterations"`
	Calls      *int     `toml:"calls"`
	Runs       *int     `toml:"runs"`
}

type rawRepeats struct {
	Boots      *int `toml:"boots"`
	Iterations *int `toml:"iterations"`
	MaxBoots   *int `toml:"max_boots"`
}

type rawCompare struct {
	Threshold any   `toml:"threshold"` // "1%"
	Layout    *bool `toml:"layout"`
}

type rawTarget struct {
	Kind     string   `toml:"kind"`
	Host     string   `toml:"host"`
	BootHook string   `toml:"boot_hook"`
	Boot     string   `toml:"boot"`
	Initrd   string   `toml:"initrd"`
	Console  string   `toml:"console_log"`
	Identity string   `toml:"identity"`
	SSHOpts  []string `toml:"ssh_options"`
	SMP      *int     `toml:"smp"`
	Memory   any      `toml:"memory"` // "512M", "1G" or MiB as an integer
	Timeout  string   `toml:"timeout"`
	KVM      string   `toml:"kvm"`
	Cmdline  string   `toml:"cmdline"`
	MaxLost  *int     `toml:"max_lost_boots"`
}

type rawComparison struct {
	Base  string `toml:"base"`
	Other string `toml:"other"`
}

type rawChain struct {
	Name     string   `toml:"name"`
	Variants []string `toml:"variants"`
}
