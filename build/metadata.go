package build

// Metadata is an artifact's metadata.json. Its sections follow tuxmake's
// metadata.json (build, results, source, git, compiler, tools) so that tools
// reading tuxmake output find the usual fields; patcheval's own additions
// live under "patcheval".
type Metadata struct {
	Build     MetaBuild         `json:"build"`
	Results   MetaResults       `json:"results"`
	Source    MetaSource        `json:"source"`
	Git       MetaGit           `json:"git"`
	Compiler  MetaCompiler      `json:"compiler"`
	Tools     map[string]string `json:"tools"`
	Patcheval MetaPatcheval     `json:"patcheval"`
}

// MetaBuild is how the kernel was built.
type MetaBuild struct {
	TargetArch string   `json:"target_arch"` // ppc64le, arm64, x86_64
	KernelArch string   `json:"kernel_arch"` // ARCH= (powerpc, arm64, x86_64)
	Toolchain  string   `json:"toolchain"`   // gcc-12, clang-14
	Kconfig    string   `json:"kconfig"`     // base target or config file
	KconfigAdd []string `json:"kconfig_add"` // fragments, then the variant's symbols
	Targets    []string `json:"targets"`
	Jobs       int      `json:"jobs"`
	// MakeCommand is the build's make command line (without isolation
	// wrappers), ReproducerCmdline the whole sequence to redo it by hand.
	MakeCommand       []string          `json:"make_command"`
	ReproducerCmdline []string          `json:"reproducer_cmdline,omitempty"`
	Environment       map[string]string `json:"environment,omitempty"`
	Incremental       bool              `json:"incremental"`
	CCache            bool              `json:"ccache"`
	// CompilerCache is kcc (patcheval's), ccache or none.
	CompilerCache string `json:"compiler_cache"`
}

// MetaResults is how the build went.
type MetaResults struct {
	Status   string `json:"status"` // PASS or FAIL
	Errors   int    `json:"errors"`
	Warnings int    `json:"warnings"`
	// Duration in seconds per phase: checkout, config, build, total.
	Duration  map[string]float64  `json:"duration"`
	Artifacts map[string][]string `json:"artifacts,omitempty"`
	// ErrorKind is "kernel", "infra" or "input" on failure; Error the
	// message and ErrorExcerpt the first error lines.
	ErrorKind    string   `json:"error_kind,omitempty"`
	Error        string   `json:"error,omitempty"`
	ErrorFile    string   `json:"error_file,omitempty"`
	ErrorLine    int      `json:"error_line,omitempty"`
	ErrorExcerpt []string `json:"error_excerpt,omitempty"`
	// ObjectsCompiled counts the CC/AS steps make ran (small for an
	// incremental build).
	ObjectsCompiled int `json:"objects_compiled"`
	// CCacheHits and CCacheMisses split those steps by the compiler
	// cache (Build.CompilerCache; the names are tuxmake's): a miss really
	// ran the compiler. (kbuild rebuilds every object that mentions a
	// changed CONFIG_ symbol or includes a changed header, e.g. all of
	// include/linux/kernel.h's users; kcc answers those whose preprocessed
	// tokens did not change, ccache those whose text with line markers
	// did not.)
	CCacheHits   int `json:"ccache_hits"`
	CCacheMisses int `json:"ccache_misses"`
	// CompilerCacheVerified counts objects answered by kcc that were
	// recompiled directly and found identical (Options.VerifyCompilerCache).
	CompilerCacheVerified int `json:"compiler_cache_verified,omitempty"`
}

// MetaSource describes the kernel source.
type MetaSource struct {
	KernelVersion string `json:"kernelversion,omitempty"`
	KernelRelease string `json:"kernelrelease,omitempty"`
}

// MetaGit is the commit built.
type MetaGit struct {
	URL    string `json:"url"` // the repository path
	Commit string `json:"commit"`
	Tree   string `json:"tree"`
	Ref    string `json:"ref,omitempty"` // the requested revision
}

// MetaCompiler is tuxmake's compiler section.
type MetaCompiler struct {
	Name        string `json:"name"`    // gcc, clang
	Version     string `json:"version"` // major
	VersionFull string `json:"version_full"`
}

// MetaPatcheval holds what tuxmake has no field for.
type MetaPatcheval struct {
	Variant string `json:"variant,omitempty"`
	// RequestedSymbols are the variant's symbols (without CONFIG_), all
	// verified to hold in the final .config.
	RequestedSymbols map[string]string `json:"requested_symbols,omitempty"`
	// FragmentSymbols that did not hold in the final .config (warnings,
	// like merge_config.sh's "didn't make it into the final config").
	ConfigWarnings []string  `json:"config_warnings,omitempty"`
	ConfigHash     string    `json:"config_hash"`
	CacheKey       string    `json:"cache_key"`
	RecipeHash     string    `json:"recipe_hash"`
	Isolation      Isolation `json:"isolation"`
	Toolchain      Toolchain `json:"toolchain"`
	Image          string    `json:"image,omitempty"` // file name in the artifact dir
	// BuildID is the GNU build-id of the linked vmlinux (hex): what a
	// booted kernel shows in /sys/kernel/notes, so a target can prove it
	// runs this artifact (internal/buildid).
	BuildID string `json:"build_id,omitempty"`
	Started string `json:"started,omitempty"`
}
