// Package build builds Linux kernels for evaluation: one Artifact per
// Variant (a base config, Fragments and the Variant's Kconfig symbols),
// cross-compiled for ppc64le, arm64 or x86_64.
//
// A build composes the .config like scripts/kconfig/merge_config.sh (base
// target or file, then Fragments, then the Variant's symbols), runs make
// olddefconfig and verifies, before compiling, that every requested symbol
// holds its value (package kconfig explains why one did not). Artifacts
// (image, System.map, .config, build log, tuxmake-style metadata.json) are
// cached by content: (tree hash, final .config, toolchain, arch, targets).
// Each (repository, arch, recipe) has a workspace whose sources are
// materialised incrementally with gittree.Checkout and whose O= directory is
// kept, so a base -> patched rebuild compiles only what the Series changed.
//
// Failures are typed: *KernelError (the tree does not compile or link:
// exit 1) and *InfraError (toolchain, disk, killed, timeout: exit 3);
// configuration problems are bad input (exit 2).
//
// A build runs the patched tree's Makefiles, scripts and host programs:
// the series author's code. Every make (and every recorded compile kcc
// verification reruns) runs in the sandbox of internal/sandbox: as an
// unprivileged uid, with a scrubbed environment, no network, no other
// process in sight, only the recipe's O= and home directories and its
// commit's kcc layer writable, the sources and the toolchain read-only,
// nothing else of the host visible, and bounded processes, CPU time,
// memory per process and disk (a disk overrun is the tree's failure,
// exit 1). A machine that cannot sandbox refuses to build (infra, exit 3)
// unless the operator opted out (Options.Unsandboxed, PATCHEVAL_SANDBOX=off).
// What one build leaves behind reaches only builds of its descendants:
// kcc reads the layers of the commit's ancestors only (package kcc), and
// an O= directory last used by a commit that is not an ancestor is
// emptied before it is reused (claimWorkspace).
package build

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/patcheval/patcheval/build/coverage"
	"github.com/patcheval/patcheval/build/kcc"
	"github.com/patcheval/patcheval/internal/arch"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/gittree"
	"github.com/patcheval/patcheval/internal/progress"
	"github.com/patcheval/patcheval/internal/sandbox"
	"github.com/patcheval/patcheval/internal/xdg"
)

// Request is one kernel to build.
type Request struct {
	// Repo is a git repository (bare or not); Commit any revision in it.
	Repo, Commit string
	// Arch is ppc64le, arm64 or x86_64 (aliases accepted).
	Arch string
	// BaseConfig is a make target (tinyconfig, defconfig,
	// ppc64le_guest_defconfig, ...) or the path of a config file.
	BaseConfig string
	// Fragments are config fragment files merged in order over the base.
	Fragments []string
	// Symbols are the Variant's Kconfig symbols (without CONFIG_): SYM ->
	// y, n, m or a value. Each must hold in the final .config.
	Symbols map[string]string
	// Variant names this kernel ("voluntary", "dynamic").
	Variant string
	// LLVM builds with LLVM=1 (clang, lld) instead of GCC.
	LLVM bool
	// Targets are make targets; empty means the arch's boot image.
	Targets []string
}

// Options control how builds run.
type Options struct {
	// CacheDir holds builds/ (artifacts, workspaces) and ccache/; default
	// xdg.CacheDir().
	CacheDir string
	// Jobs is one build's make -j (default: the number of CPUs).
	Jobs int
	// Budget, when set, is the -j budget this build shares with the
	// builds running beside it (Jobs is then unused); BuildAll makes one.
	Budget   *Budget
	Progress *progress.Reporter
	// Timeout bounds one build (0: none).
	Timeout time.Duration
	// NoNetwork runs make in a private network namespace (unshare -n)
	// when the machine allows; Metadata says whether it applied.
	NoNetwork bool
	// Nice runs make under nice -n Nice.
	Nice int
	// NoCache ignores cached artifacts (the build still updates the cache).
	NoCache bool
	// CompilerCache is "kcc" (default: patcheval's own compiler cache, see
	// package kcc), "ccache" (when installed) or "none".
	CompilerCache string
	// VerifyCompilerCache recompiles up to this many of the objects kcc
	// answered from its store, directly with kbuild's recorded command, and
	// fails the build (infra) unless they are byte-identical.
	VerifyCompilerCache int
	// ConfigOnly stops after the verified .config: the Artifact has Config
	// and Meta (status PASS, no image) and is not cached.
	ConfigOnly bool
	// Log receives the build's output as it runs (in addition to the log
	// file); nil for none.
	Log io.Writer
	// Unsandboxed runs the tree's Makefiles without the sandbox
	// (internal/sandbox): only for trees the operator trusts. Without it
	// (and without PATCHEVAL_SANDBOX=off) a machine that cannot sandbox
	// refuses to build (infra error, exit 3).
	Unsandboxed bool
	// Limits bound the sandboxed build (zero fields: sandbox.DefaultLimits).
	Limits sandbox.Limits
}

// Artifact is a built (or failed) kernel.
type Artifact struct {
	// Dir is the artifact directory: <cache>/builds/<key>/.
	Dir       string `json:"dir"`
	Image     string `json:"image,omitempty"`
	SystemMap string `json:"system_map,omitempty"`
	Config    string `json:"config,omitempty"`
	Log       string `json:"log,omitempty"`
	// MetadataPath is Dir/metadata.json.
	MetadataPath string   `json:"metadata"`
	Meta         Metadata `json:"meta"`
	CacheHit     bool     `json:"cache_hit"`
}

// BuildID is the GNU build-id of the artifact's vmlinux ("" for an
// artifact stored before patcheval recorded it).
func (a *Artifact) BuildID() string { return a.Meta.Patcheval.BuildID }

// ConfigHash is the final .config's hash.
func (a *Artifact) ConfigHash() string { return a.Meta.Patcheval.ConfigHash }

// Build builds one kernel, or returns the cached artifact at once.
func Build(ctx context.Context, req Request, opts Options) (*Artifact, error) {
	return build(ctx, req, opts)
}

// BuildAll builds several kernels concurrently within one -j budget
// (opts.Jobs, or opts.Budget when set): see Budget. Results are in request
// order; errs[i] is nil when arts[i] built.
func BuildAll(ctx context.Context, reqs []Request, opts Options) ([]*Artifact, []error) {
	arts := make([]*Artifact, len(reqs))
	errs := make([]error, len(reqs))
	if opts.Budget == nil && len(reqs) > 1 {
		b, err := NewBudget(opts.Jobs)
		if err != nil {
			for i := range errs {
				errs[i] = fail.Infra(err)
			}
			return arts, errs
		}
		defer b.Close()
		opts.Budget = b
	}
	var wg sync.WaitGroup
	for i := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			arts[i], errs[i] = build(ctx, reqs[i], opts)
		}()
	}
	wg.Wait()
	return arts, errs
}

// Budget is one -j budget shared by kernel builds that run at the same
// time, in one process: a GNU make jobserver pipe that every build's make
// joins (--jobserver-auth), so that whichever builds run keep every job
// slot busy until the last link, and never more than the budget.
//
// Up to Jobs+1 builds run at once (more wait for a turn). Every make has
// one implicit job slot, so Jobs+1 builds keep one compile more than there
// are cores: while one build is in a serial step (checkout, olddefconfig,
// the vmlinux link and kallsyms passes) the others keep every core busy.
// The pipe holds the slots that the running makes' implicit ones leave of
// the budget: none while Jobs or more builds run, one more each time a
// finishing build leaves fewer (so the last build runs with the whole
// budget), one fewer when a build starts (taken back as soon as a running
// make returns it).
type Budget struct {
	jobs int
	js   *jobserver
	turn chan struct{} // one element per running build (cap Jobs+1)

	mu      sync.Mutex
	running int // builds between start and finish
	added   int // tokens put in the pipe and not taken back
}

// NewBudget makes a shared budget of jobs slots (<= 0: the number of
// CPUs). Close it when its builds are done.
func NewBudget(jobs int) (*Budget, error) {
	if jobs <= 0 {
		jobs = defaultJobs()
	}
	js, err := newJobserver(jobs)
	if err != nil {
		return nil, err
	}
	return &Budget{jobs: jobs, js: js, turn: make(chan struct{}, jobs+1), added: jobs}, nil
}

// Jobs is the budget's size.
func (b *Budget) Jobs() int { return b.jobs }

// Close releases the pipe.
func (b *Budget) Close() { b.js.close() }

// start waits for a build's turn and accounts for its make's implicit
// slot; finish (the returned function) gives both back.
func (b *Budget) start(ctx context.Context) (finish func(), err error) {
	select {
	case b.turn <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	b.mu.Lock()
	b.running++
	take := max(0, b.added-b.want())
	b.added -= take
	b.mu.Unlock()
	// Taken back in the background: the tokens may be out with running
	// makes' compiles (or lost with a killed make, when Close ends the
	// wait), and this build need not wait for them.
	b.js.takeBack(take)
	return func() {
		b.mu.Lock()
		b.running--
		if b.running == 0 && b.js.settle(b.jobs) {
			// Nothing held a token: the pipe is right again, whatever
			// killed makes took with them.
			b.added = b.jobs
		} else {
			give := max(0, b.want()-b.added)
			b.added += give
			b.js.add(give)
		}
		b.mu.Unlock()
		<-b.turn
	}, nil
}

// want is how many tokens belong in the pipe: the budget left by the
// running makes' implicit slots.
func (b *Budget) want() int { return max(0, b.jobs-b.running) }

func defaultJobs() int {
	n := numCPU()
	if n < 1 {
		n = 1
	}
	return n
}

// job is one build in progress.
type job struct {
	req      Request
	opts     Options
	arch     arch.Arch
	tc       *Toolchain
	cache    string
	label    string
	commit   string
	tree     string
	when     time.Time
	recipe   string // hash of what decides the config
	indexKey string
	ws       string // the Variant's workspace: out/ (O=), home/, build.log
	srcDir   string // the Variant's sources: ws/src
	// cfgSrc holds the sources the configuration is composed and verified
	// in, shared by every recipe of (repo, arch); cfgOut is the recipe's
	// O= directory there. Config-only requests and requests whose symbols
	// do not hold never materialise a per-recipe source tree.
	cfgSrc, cfgOut string
	syms           map[string]string
	baseFile       []byte // BaseConfig content when it is a file
	frags          [][]byte
	targets        []string
	js             *jobserver
	// ancestry is the commit and its ancestors (lineage), nearest first.
	ancestry []string
}

func build(ctx context.Context, req Request, opts Options) (*Artifact, error) {
	j, err := prepare(ctx, req, opts)
	if err != nil {
		return nil, err
	}
	if !opts.NoCache && !opts.ConfigOnly {
		if a := j.lookupIndex(); a != nil {
			opts.Progress.Printf("%s: cached %s", j.label, a.Dir)
			return a, nil
		}
	}
	j.ancestry = j.lineage()
	defer j.register()()
	if err := j.waitForAncestors(ctx); err != nil {
		return nil, err
	}
	if b := opts.Budget; b != nil {
		opts.Progress.Status("%s: waiting for a turn in the -j %d budget", j.label, b.jobs)
		finish, err := b.start(ctx)
		if err != nil {
			return nil, &InfraError{Reason: "interrupted", Msg: "build interrupted", Err: err}
		}
		defer finish()
		j.js = b.js
	}
	if opts.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, opts.Timeout)
		defer cancel()
	}
	return j.run(ctx)
}

// Cached returns the cached artifact for req without building, or nil.
func Cached(ctx context.Context, req Request, opts Options) (*Artifact, error) {
	j, err := prepare(ctx, req, opts)
	if err != nil {
		return nil, err
	}
	return j.lookupIndex(), nil
}

// prepare validates the request, resolves the commit and the toolchain and
// computes the recipe.
func prepare(ctx context.Context, req Request, opts Options) (*job, error) {
	ai, err := lookupArch(req.Arch)
	if err != nil {
		return nil, err
	}
	req.Arch = ai.Name
	if req.Repo == "" || req.Commit == "" {
		return nil, fail.Inputf("build: a repository (--tree) and a commit are required")
	}
	if abs, err := filepath.Abs(req.Repo); err == nil {
		req.Repo = abs
	}
	if req.BaseConfig == "" {
		return nil, fail.Inputf("build: a base config (make target like tinyconfig, or a config file) is required")
	}
	j := &job{req: req, opts: opts, arch: ai}
	if j.opts.CacheDir == "" {
		j.opts.CacheDir = xdg.CacheDir()
	}
	if j.opts.Jobs <= 0 {
		j.opts.Jobs = defaultJobs()
	}
	if j.opts.Progress == nil {
		j.opts.Progress = progress.Discard()
	}
	j.cache = filepath.Join(j.opts.CacheDir, "builds")
	j.label = ai.Name
	if req.Variant != "" {
		j.label += "/" + req.Variant
	}
	j.syms, err = normalizeSymbols(req.Symbols)
	if err != nil {
		return nil, err
	}
	if isConfigFile(req.BaseConfig) {
		j.baseFile, err = os.ReadFile(req.BaseConfig)
		if err != nil {
			return nil, fail.Inputf("base config %s: %w", req.BaseConfig, err)
		}
	} else if !validTarget(req.BaseConfig) {
		return nil, fail.Inputf("base config %q is neither a config file nor a *config make target", req.BaseConfig)
	}
	for _, f := range req.Fragments {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, fail.Inputf("config fragment %s: %w", f, err)
		}
		j.frags = append(j.frags, data)
	}
	j.targets = req.Targets
	if len(j.targets) == 0 {
		j.targets = ai.Targets
	}
	j.commit, j.tree, j.when, err = resolveCommit(req.Repo, req.Commit)
	if err != nil {
		return nil, err
	}
	j.tc, err = FindToolchain(ctx, ai.Name, req.LLVM)
	if err != nil {
		return nil, err
	}
	switch opts.CompilerCache {
	case "", "kcc", "none":
		// kcc or nothing: ccache stays out of the command line.
		tc := *j.tc
		tc.CCache, tc.CCacheVersion = "", ""
		j.tc = &tc
	case "ccache":
		if j.tc.CCache == "" {
			return nil, &InfraError{Arch: ai.Name, Reason: "toolchain", Msg: "ccache requested but not installed (apt-get install ccache)"}
		}
	default:
		return nil, fail.Inputf("build: unknown compiler cache %q (kcc, ccache or none)", opts.CompilerCache)
	}
	parts := [][]byte{[]byte("recipe/v1"), []byte(ai.Name), []byte(j.tc.ID())}
	if j.baseFile != nil {
		parts = append(parts, []byte("file"), j.baseFile)
	} else {
		parts = append(parts, []byte("target"), []byte(req.BaseConfig))
	}
	for _, f := range j.frags {
		parts = append(parts, f)
	}
	parts = append(parts, symbolsFragment(j.syms))
	j.recipe = sha256hex(parts...)
	j.indexKey = sha256hex([]byte("index/v2"), []byte(j.tree), []byte(j.recipe), []byte(strings.Join(j.targets, " ")))
	j.ws = filepath.Join(j.cache, "work", sha256hex([]byte(req.Repo), []byte(j.recipe))[:24])
	j.srcDir = filepath.Join(j.ws, "src")
	j.cfgSrc = filepath.Join(j.cache, "src", sha256hex([]byte(req.Repo), []byte(ai.Name))[:24])
	j.cfgOut = filepath.Join(j.cache, "cfg", sha256hex([]byte(req.Repo), []byte(j.recipe))[:24])
	return j, nil
}

func isConfigFile(s string) bool {
	if strings.ContainsRune(s, '/') || strings.HasSuffix(s, ".config") || strings.HasPrefix(s, ".") {
		return true
	}
	if fi, err := os.Stat(s); err == nil && fi.Mode().IsRegular() {
		return true
	}
	return false
}

func validTarget(s string) bool {
	if !strings.HasSuffix(s, "config") {
		return false
	}
	for _, r := range s {
		if !(r == '_' || r == '-' || r == '.' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// resolveCommit resolves rev in the repository at repo to a commit hash,
// its tree hash and its committer date.
func resolveCommit(repo, rev string) (commit, tree string, when time.Time, err error) {
	c, err := gittree.Resolve(repo, rev)
	if err != nil {
		return "", "", when, err
	}
	return c.Hash.String(), c.TreeHash.String(), c.Committer.When, nil
}

// lookupIndex returns the cached artifact for the job's (tree, recipe,
// targets), or nil.
func (j *job) lookupIndex() *Artifact {
	key, err := os.ReadFile(filepath.Join(j.cache, "index", j.indexKey))
	if err != nil {
		return nil
	}
	return j.loadArtifact(strings.TrimSpace(string(key)))
}

// loadArtifact reads a passed artifact from the cache; nil when absent or
// damaged.
func (j *job) loadArtifact(key string) *Artifact {
	if key == "" || strings.ContainsAny(key, "/.") {
		return nil
	}
	a, err := LoadArtifact(filepath.Join(j.cache, key))
	if err != nil || a.Meta.Results.Status != "PASS" {
		return nil
	}
	if _, err := os.Stat(a.Image); err != nil {
		return nil
	}
	if a.Meta.Patcheval.BuildID == "" && !j.addBuildID(a) {
		return nil // stored before build-ids were: relink to get one
	}
	a.CacheHit = true
	a.Meta.Patcheval.Variant = j.req.Variant
	return a
}

// LoadArtifact reads an artifact directory (one holding metadata.json).
func LoadArtifact(dir string) (*Artifact, error) {
	mp := filepath.Join(dir, "metadata.json")
	data, err := os.ReadFile(mp)
	if err != nil {
		return nil, fail.Inputf("build artifact %s: %w", dir, err)
	}
	a := &Artifact{Dir: dir, MetadataPath: mp}
	if err := json.Unmarshal(data, &a.Meta); err != nil {
		return nil, fail.Inputf("build artifact %s: metadata.json: %w", dir, err)
	}
	a.Config = filepath.Join(dir, "config")
	a.Log = filepath.Join(dir, "build.log")
	if a.Meta.Patcheval.Image != "" {
		a.Image = filepath.Join(dir, a.Meta.Patcheval.Image)
		a.SystemMap = filepath.Join(dir, "System.map")
	}
	return a, nil
}

// run composes the config, verifies it, compiles and stores the artifact.
// The workspace lock is held.
//
// The recipe's config directory is locked while the config is composed;
// its workspace (sources, O=) only while compiling, so config-only
// requests never wait for a compile.
func (j *job) run(ctx context.Context) (*Artifact, error) {
	b := &buildRun{job: j, ctx: ctx, start: time.Now()}
	b.meta = j.newMeta(b.start)
	if err := b.lockConfig(); err != nil {
		return nil, err
	}
	defer b.unlockConfig()
	if a := b.cachedRecipe(); a != nil {
		return a, nil
	}
	if err := b.openLog(); err != nil {
		return nil, err
	}
	defer os.Remove(b.logPath)
	defer b.logf.Close()
	if err := b.setUpCompilerCache(); err != nil {
		return b.failed(err)
	}
	if err := b.composeConfig(); err != nil {
		return b.failed(err)
	}
	if j.opts.ConfigOnly {
		return b.storeConfig()
	}
	if a := b.cachedBuild(" (same final .config)"); a != nil {
		// Another recipe gave the same final .config for this tree.
		return a, nil
	}
	b.unlockConfig()
	if err := b.lockWorkspace(); err != nil {
		return b.failed(err)
	}
	defer b.wunlock()
	if a := b.cachedBuild(""); a != nil {
		return a, nil
	}
	release, err := b.checkOutSources()
	if err != nil {
		return b.failed(err)
	}
	defer release()
	if err := b.distrustInterrupted(); err != nil {
		return b.failed(err)
	}
	if err := b.configureBuildDir(); err != nil {
		return b.failed(err)
	}
	if err := b.compile(); err != nil {
		return b.failed(err)
	}
	return b.storeBuild()
}

// buildRun is the state of one job.run, filled step by step.
type buildRun struct {
	job   *job
	ctx   context.Context
	start time.Time
	meta  Metadata

	cunlock   func() // unlocks the recipe's config directory
	cfgLocked bool
	wunlock   func() // unlocks the recipe's workspace

	logf    *os.File
	logPath string
	logw    io.Writer // the build log, and opts.Log
	out     string    // the O= directory: the config's, then the workspace's

	lineage  []string
	kccCmd   string
	kccLayer string
	kccRead  []string

	final   []byte  // the verified .config
	key     string  // the artifact's cache key
	sources string  // the state the workspace's sources were checked out in
	r       *runner // the compile's runner
}

// failed records a failed build (its log, metadata) and returns its error.
func (b *buildRun) failed(err error) (*Artifact, error) {
	return b.job.recordFailure(b.meta, err, b.start, b.logPath, b.out)
}

// lockConfig locks the recipe's config directory.
func (b *buildRun) lockConfig() error {
	j := b.job
	if err := os.MkdirAll(j.cfgOut, 0o755); err != nil {
		return classifyIO(j, err)
	}
	cunlock, err := lockFile(b.ctx, j.cfgOut+".lock", func() {
		j.opts.Progress.Status("%s: waiting for another build configuring the same recipe", j.label)
	})
	if err != nil {
		return err
	}
	b.cunlock, b.cfgLocked = cunlock, true
	return nil
}

// unlockConfig unlocks the recipe's config directory, if it is still
// locked.
func (b *buildRun) unlockConfig() {
	if b.cfgLocked {
		b.cunlock()
		b.cfgLocked = false
	}
}

// cachedRecipe is the artifact the index holds for the job's (tree,
// recipe, targets), or nil (or with NoCache or ConfigOnly).
func (b *buildRun) cachedRecipe() *Artifact {
	j := b.job
	if j.opts.NoCache || j.opts.ConfigOnly {
		return nil
	}
	a := j.lookupIndex()
	if a != nil {
		j.opts.Progress.Printf("%s: cached %s", j.label, a.Dir)
	}
	return a
}

// openLog makes the config directory's O= and home directories and opens
// the build log in it.
func (b *buildRun) openLog() error {
	j := b.job
	b.out = filepath.Join(j.cfgOut, "out")
	for _, d := range []string{b.out, filepath.Join(j.cfgOut, "home")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fail.Infra(fmt.Errorf("build workspace: %w", err))
		}
	}
	logf, err := os.CreateTemp(j.cfgOut, "build-*.log")
	if err != nil {
		return fail.Infra(fmt.Errorf("build log: %w", err))
	}
	b.logf, b.logPath = logf, logf.Name()
	b.logw = logf
	if j.opts.Log != nil {
		b.logw = io.MultiWriter(logf, j.opts.Log)
	}
	return nil
}

// setUpCompilerCache finds the compiler cache wrapper and the kcc layers
// of the commit's lineage (its own made ready).
func (b *buildRun) setUpCompilerCache() error {
	j := b.job
	kccCmd, err := j.compilerCache()
	if err != nil {
		return err
	}
	b.kccCmd = kccCmd
	if kccCmd == "" && b.meta.Build.CompilerCache == "kcc" {
		b.meta.Build.CompilerCache = "none" // the wrapper could not run here
	}
	b.lineage = j.ancestry
	if len(b.lineage) == 0 {
		b.lineage = j.lineage()
	}
	b.kccLayer, b.kccRead = j.kccLayers(b.lineage)
	if kccCmd != "" {
		if err := os.MkdirAll(b.kccLayer, 0o755); err != nil {
			return classifyIO(j, err)
		}
	}
	return nil
}

// newRunner is a runner of make in src with O=out.
func (b *buildRun) newRunner(src, out, home string) *runner {
	j := b.job
	return &runner{arch: j.arch, tc: j.tc, src: src, out: out, home: home, cacheDir: j.opts.CacheDir,
		ws: j.cache, nice: j.opts.Nice, noNetwork: j.opts.NoNetwork,
		timestamp: j.when.UTC().Format("Mon Jan 2 15:04:05 UTC 2006"), label: j.label,
		progress: j.opts.Progress, jobserver: j.js, jobs: j.opts.Jobs, kcc: b.kccCmd,
		kccLayer: b.kccLayer, kccRead: b.kccRead, unsandboxed: j.opts.Unsandboxed, limits: j.opts.Limits}
}

// composeConfig composes and verifies the config in the (repo, arch)
// config sources, held at j.commit while olddefconfig runs, and sets the
// artifact's cache key from it.
func (b *buildRun) composeConfig() error {
	j, meta := b.job, &b.meta
	if _, err := j.claimWorkspace(j.cfgOut, b.lineage); err != nil {
		return classifyIO(j, err)
	}
	t0 := time.Now()
	cst, crelease, err := j.acquireSource(b.ctx, j.cfgSrc)
	if err != nil {
		return err
	}
	fmt.Fprintf(b.logw, "# config sources %s at %s (tree %s): %s\n", j.cfgSrc, j.commit, j.tree, cst)
	cr := b.newRunner(j.cfgSrc, b.out, filepath.Join(j.cfgOut, "home"))
	j.opts.Progress.Status("%s: configuring (%s)", j.label, j.req.BaseConfig)
	final, warnings, err := j.configure(b.ctx, cr, b.logw, b.logPath)
	crelease()
	meta.Build.ReproducerCmdline = j.reproducer(cr)
	meta.Build.Environment = map[string]string{}
	for _, e := range cr.env() {
		k, v, _ := strings.Cut(e, "=")
		meta.Build.Environment[k] = v
	}
	meta.Patcheval.Isolation = cr.iso
	if err != nil {
		return err
	}
	meta.Results.Duration["config"] = time.Since(t0).Seconds()
	meta.Patcheval.ConfigWarnings = warnings
	meta.Patcheval.ConfigHash = ConfigHash(final)
	b.final = final
	// v2: the build environment pins KBUILD_BUILD_VERSION (v1 kernels
	// carry the O= directory's link count in their version string).
	b.key = sha256hex([]byte("build/v2"), []byte(j.tree), final, []byte(j.tc.ID()), []byte(j.arch.Name),
		[]byte(strings.Join(j.targets, " ")))
	meta.Patcheval.CacheKey = b.key
	return nil
}

// storeConfig stores the config-only artifact (config, log, metadata).
func (b *buildRun) storeConfig() (*Artifact, error) {
	j, meta := b.job, b.meta
	meta.Results.Status = "PASS"
	meta.Results.Duration["total"] = time.Since(b.start).Seconds()
	dir := filepath.Join(j.cache, "configs", j.indexKey[:24])
	os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, classifyIO(j, err)
	}
	a := &Artifact{Dir: dir, Config: filepath.Join(dir, "config"), Log: filepath.Join(dir, "build.log"),
		MetadataPath: filepath.Join(dir, "metadata.json"), Meta: meta}
	if err := os.WriteFile(a.Config, b.final, 0o644); err != nil {
		return nil, classifyIO(j, err)
	}
	copyFile(b.logPath, a.Log)
	data, _ := json.MarshalIndent(meta, "", "  ")
	os.WriteFile(a.MetadataPath, append(data, '\n'), 0o644)
	return a, nil
}

// cachedBuild is the passed artifact stored under the build's key
// (indexed for the recipe), or nil (or with NoCache).
func (b *buildRun) cachedBuild(note string) *Artifact {
	j := b.job
	if j.opts.NoCache {
		return nil
	}
	a := j.loadArtifact(b.key)
	if a != nil {
		j.writeIndex(b.key)
		j.opts.Progress.Printf("%s: cached %s%s", j.label, a.Dir, note)
	}
	return a
}

// lockWorkspace makes the recipe's workspace (kept between builds) and
// locks it.
func (b *buildRun) lockWorkspace() error {
	j := b.job
	for _, d := range []string{"out", "home"} {
		if err := os.MkdirAll(filepath.Join(j.ws, d), 0o755); err != nil {
			return classifyIO(j, err)
		}
	}
	wunlock, err := lockFile(b.ctx, j.ws+".lock", func() {
		j.opts.Progress.Status("%s: waiting for another build in the same workspace", j.label)
	})
	if err != nil {
		return err
	}
	b.wunlock = wunlock
	return nil
}

// checkOutSources claims the workspace for the commit's lineage and
// moves its sources (incrementally) to j.commit. The sources are held
// until release.
func (b *buildRun) checkOutSources() (release func(), err error) {
	j := b.job
	if emptied, err := j.claimWorkspace(j.ws, b.lineage); err != nil {
		return nil, classifyIO(j, err)
	} else if emptied {
		fmt.Fprintf(b.logw, "# %s: last built from a commit that is not an ancestor of %s: emptied, built afresh\n", j.ws, j.commit)
	}
	b.out = filepath.Join(j.ws, "out")
	t0 := time.Now()
	st, release, err := j.acquireSource(b.ctx, j.srcDir)
	if err != nil {
		return nil, err
	}
	b.meta.Results.Duration["checkout"] = time.Since(t0).Seconds()
	b.sources = st
	return release, nil
}

// distrustInterrupted removes what a build killed in O= before (another
// process, or this machine before it was lost) left half-written, notes
// whether the build is incremental and logs the sources' state.
func (b *buildRun) distrustInterrupted() error {
	j, out := b.job, b.out
	if n, err := distrustInterrupted(out); err != nil {
		return classifyIO(j, err)
	} else if n > 0 {
		fmt.Fprintf(b.logw, "# %s: an earlier make here was interrupted: %d file(s) it was writing removed, to be made again\n", out, n)
		j.opts.Progress.Printf("%s: an earlier build in %s was interrupted: %d half-written file(s) made again", j.label, out, n)
	}
	_, statErr := os.Stat(filepath.Join(out, "vmlinux"))
	b.meta.Build.Incremental = statErr == nil
	fmt.Fprintf(b.logw, "# sources %s at %s: %s\n", j.srcDir, j.commit, b.sources)
	return nil
}

// configureBuildDir writes the verified .config into O= and checks that
// olddefconfig there leaves it as it was.
func (b *buildRun) configureBuildDir() error {
	j, out := b.job, b.out
	b.r = b.newRunner(j.srcDir, out, filepath.Join(j.ws, "home"))
	r := b.r
	if err := writeBelow(out, ".config", b.final); err != nil {
		return classifyIO(j, err)
	}
	if lines, err := r.run(b.ctx, b.logw, false, "olddefconfig"); err != nil {
		return r.makeFailure(b.ctx, err, lines, b.logPath)
	}
	if again, err := readBelow(out, ".config"); err != nil || !sameSymbols(again, b.final) {
		return &InfraError{Arch: j.arch.Name, Variant: j.req.Variant, Reason: "make",
			Msg: "olddefconfig in the build directory changed the verified .config (sources at two different states?)"}
	}
	return nil
}

// compile makes the targets (an interrupted make's files marked as such)
// and, if asked, verifies the compiler cache's objects.
func (b *buildRun) compile() error {
	j, r, out, meta := b.job, b.r, b.out, &b.meta
	t0 := time.Now()
	j.opts.Progress.Status("%s: make %s", j.label, strings.Join(j.targets, " "))
	// Written after the configuration (olddefconfig's files predate
	// it): what an interrupted compile wrote is what is newer.
	if err := markRunning(out); err != nil {
		return classifyIO(j, err)
	}
	os.Remove(r.statsLog())
	lines, err := r.run(b.ctx, b.logw, true, j.targets...)
	meta.Results.CCacheHits, meta.Results.CCacheMisses = r.ccacheStats()
	meta.Build.MakeCommand = r.makeArgs(j.targets...)
	meta.Results.Duration["build"] = time.Since(t0).Seconds()
	meta.Results.Errors, meta.Results.Warnings = countDiagnostics(lines)
	meta.Results.ObjectsCompiled = objectCount(lines)
	meta.Patcheval.Isolation = r.iso
	if err != nil {
		if madeItsOwnExit(b.ctx, err, j.srcDir) {
			// Make ended by itself and Kbuild deleted what it could not
			// finish: the next build need not walk the directory.
			os.Remove(filepath.Join(out, runningMark))
		}
		ferr := r.makeFailure(b.ctx, err, lines, b.logPath)
		setVariant(ferr, j.req.Variant)
		return ferr
	}
	if j.opts.VerifyCompilerCache > 0 && r.kcc != "" {
		n, err := r.verifyKCC(b.ctx, j.opts.VerifyCompilerCache, b.logw)
		meta.Results.CompilerCacheVerified = n
		if err != nil {
			setVariant(err, j.req.Variant)
			return err
		}
	}
	return nil
}

// storeBuild stores the passed artifact (with the kernel's release and
// what was compiled, for the series' build coverage), indexes it for the
// recipe and trims the kcc layers.
func (b *buildRun) storeBuild() (*Artifact, error) {
	j, out, meta := b.job, b.out, &b.meta
	if rel, err := readBelow(out, "include/config/kernel.release"); err == nil {
		meta.Source.KernelRelease = strings.TrimSpace(string(rel))
		v := meta.Source.KernelRelease
		if i := strings.IndexAny(v, "-+"); i > 0 {
			v = v[:i]
		}
		meta.Source.KernelVersion = v
	}
	os.Remove(filepath.Join(out, runningMark))
	meta.Results.Status = "PASS"
	meta.Results.Duration["total"] = time.Since(b.start).Seconds()
	// What was compiled, for the series' build coverage (build/coverage).
	rec, recErr := coverage.FromObjDir(j.srcDir, out)
	if recErr != nil {
		fmt.Fprintf(b.logw, "# coverage record: %v\n", recErr)
	}
	b.logf.Sync()
	a, err := j.store(b.key, *meta, out, b.logPath)
	if err != nil {
		return nil, err
	}
	if recErr == nil {
		writeAtomic(filepath.Join(a.Dir, CoverageFile), rec.Encode())
	}
	j.writeIndex(b.key)
	j.opts.Progress.Printf("%s: built %s in %s (%d objects, %d compiled, %d from %s%s)", j.label, filepath.Base(a.Image),
		time.Since(b.start).Round(time.Second), meta.Results.ObjectsCompiled, meta.Results.ObjectsCompiled-meta.Results.CCacheHits,
		meta.Results.CCacheHits, meta.Build.CompilerCache, map[bool]string{true: ", incremental"}[meta.Build.Incremental])
	if meta.Build.CompilerCache == "kcc" {
		kcc.Trim(filepath.Join(j.opts.CacheDir, "kcc", "layers"), kccMaxBytes)
	}
	return a, nil
}

// sameSymbols reports whether two .config files assign the same values.
func sameSymbols(a, b []byte) bool {
	_, x := symbolLines(a)
	_, y := symbolLines(b)
	if len(x) != len(y) {
		return false
	}
	for k, v := range x {
		if w, ok := y[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func setVariant(err error, v string) {
	var ke *KernelError
	var ie *InfraError
	if errors.As(err, &ke) {
		ke.Variant = v
	} else if errors.As(err, &ie) {
		ie.Variant = v
	}
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

func (j *job) newMeta(start time.Time) Metadata {
	m := Metadata{
		Build: MetaBuild{TargetArch: j.arch.Name, KernelArch: j.arch.KArch, Toolchain: j.tc.Name,
			Kconfig: j.req.BaseConfig, Targets: j.targets, Jobs: j.opts.Jobs, CCache: j.tc.CCache != "",
			CompilerCache: j.compilerCacheName()},
		Results:  MetaResults{Status: "FAIL", Duration: map[string]float64{}},
		Git:      MetaGit{URL: j.req.Repo, Commit: j.commit, Tree: j.tree, Ref: j.req.Commit},
		Compiler: MetaCompiler{Name: strings.SplitN(j.tc.Name, "-", 2)[0], Version: j.tc.CCMajor, VersionFull: j.tc.CCVersion},
		Tools:    map[string]string{"ld": j.tc.Binutils},
		Patcheval: MetaPatcheval{Variant: j.req.Variant, RequestedSymbols: j.syms, RecipeHash: j.recipe,
			Toolchain: *j.tc, Started: start.UTC().Format(time.RFC3339)},
	}
	if j.tc.CCache != "" {
		m.Tools["ccache"] = j.tc.CCacheVersion
	}
	m.Build.KconfigAdd = append(m.Build.KconfigAdd, j.req.Fragments...)
	keys := make([]string, 0, len(j.syms))
	for k := range j.syms {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		m.Build.KconfigAdd = append(m.Build.KconfigAdd, configLineFor(k, j.syms[k]))
	}
	return m
}

// reproducer is the command sequence that redoes the build by hand.
func (j *job) reproducer(r *runner) []string {
	var cmds []string
	join := func(args []string) string {
		q := make([]string, len(args))
		for i, a := range args {
			q[i] = a
			if strings.ContainsAny(a, " \t'\"$") {
				q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
			}
		}
		return strings.Join(q, " ")
	}
	if j.baseFile != nil {
		cmds = append(cmds, "cp "+j.req.BaseConfig+" $O/.config")
	} else {
		cmds = append(cmds, join(r.plainMakeArgs(j.req.BaseConfig)))
	}
	if len(j.req.Fragments) > 0 || len(j.syms) > 0 {
		cmds = append(cmds, "scripts/kconfig/merge_config.sh -m -O $O $O/.config "+strings.Join(j.req.Fragments, " ")+" <variant symbols>")
	}
	cmds = append(cmds, join(r.plainMakeArgs("olddefconfig")))
	cmds = append(cmds, join(r.plainMakeArgs(j.targets...)))
	return cmds
}

// kccMaxBytes bounds kcc's object store (least recently used go first);
// a ppc64le tinyconfig kernel stores about 25 MB.
const kccMaxBytes = 4 << 30

// compilerCacheName is the compiler cache the build uses.
func (j *job) compilerCacheName() string {
	switch {
	case j.opts.CompilerCache == "" || j.opts.CompilerCache == "kcc":
		return "kcc"
	case j.tc.CCache != "":
		return "ccache"
	}
	return "none"
}

// compilerCache installs kcc's wrapper when the build uses it and returns
// the CC prefix ("" without kcc).
func (j *job) compilerCache() (string, error) {
	if j.opts.CompilerCache != "" && j.opts.CompilerCache != "kcc" {
		return "", nil
	}
	p, err := kcc.Install(filepath.Join(j.opts.CacheDir, "kcc"))
	if err == nil {
		err = kcc.Check(p)
	}
	if err != nil {
		// Build without a compiler cache rather than not at all.
		j.opts.Progress.Printf("%s: warning: %v; compiling without the compiler cache", j.label, err)
		return "", nil
	}
	return p, nil
}

// writeIndex records that the job's (tree, recipe, targets) built key.
func (j *job) writeIndex(key string) {
	dir := filepath.Join(j.cache, "index")
	if os.MkdirAll(dir, 0o755) != nil {
		return
	}
	tmp, err := os.CreateTemp(dir, ".tmp-")
	if err != nil {
		return
	}
	tmp.WriteString(key + "\n")
	tmp.Close()
	os.Rename(tmp.Name(), filepath.Join(dir, j.indexKey))
}

// store copies the outputs into <cache>/builds/<key>/ atomically.
func (j *job) store(key string, meta Metadata, out, logPath string) (*Artifact, error) {
	tmp, err := os.MkdirTemp(j.cache, ".tmp-")
	if err != nil {
		return nil, fail.Infra(fmt.Errorf("build cache: %w", err))
	}
	defer os.RemoveAll(tmp)
	image := filepath.Base(j.arch.Image)
	if err := copyFile(logPath, filepath.Join(tmp, "build.log")); err != nil {
		return nil, classifyIO(j, err)
	}
	// The rest comes out of the sandbox's O= (copyBelow: no link out of it
	// is followed).
	copies := [][2]string{{".config", "config"}}
	if _, err := os.Stat(filepath.Join(out, j.arch.Image)); err == nil {
		copies = append(copies, [2]string{j.arch.Image, image})
		meta.Patcheval.Image = image
	}
	if _, err := os.Stat(filepath.Join(out, "System.map")); err == nil {
		copies = append(copies, [2]string{"System.map", "System.map"})
	}
	if id := vmlinuxBuildID(out); id != "" {
		meta.Patcheval.BuildID = id
	}
	meta.Results.Artifacts = map[string][]string{"config": {"config"}, "log": {"build.log"}}
	for _, c := range copies {
		if err := copyBelow(out, c[0], filepath.Join(tmp, c[1])); err != nil {
			return nil, classifyIO(j, err)
		}
		switch c[1] {
		case image:
			meta.Results.Artifacts["kernel"] = []string{image}
		case "System.map":
			meta.Results.Artifacts["system_map"] = []string{"System.map"}
		}
	}
	if meta.Patcheval.Image == "" {
		return nil, &InfraError{Arch: j.arch.Name, Variant: j.req.Variant, Reason: "make",
			Msg: "make succeeded but " + j.arch.Image + " is missing (targets " + strings.Join(j.targets, " ") + ")"}
	}
	data, _ := json.MarshalIndent(meta, "", "  ")
	if err := os.WriteFile(filepath.Join(tmp, "metadata.json"), append(data, '\n'), 0o644); err != nil {
		return nil, classifyIO(j, err)
	}
	os.Chmod(tmp, 0o755) // MkdirTemp makes it 0700
	dst := filepath.Join(j.cache, key)
	os.RemoveAll(dst) // a damaged or failed entry
	if err := os.Rename(tmp, dst); err != nil {
		if _, serr := os.Stat(filepath.Join(dst, "metadata.json")); serr != nil {
			return nil, classifyIO(j, err)
		}
	}
	a, err := LoadArtifact(dst)
	if err != nil {
		return nil, fail.Infra(err)
	}
	a.Meta.Patcheval.Variant = j.req.Variant
	return a, nil
}

func classifyIO(j *job, err error) error {
	return &InfraError{Arch: j.arch.Name, Variant: j.req.Variant, Reason: ioReason(err), Msg: err.Error(), Err: err}
}

// ioReason is an I/O error's InfraError.Reason: "disk full" for ENOSPC
// (and EDQUOT), else "io".
func ioReason(err error) string {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return "disk full"
	}
	return "io"
}

// recordFailure writes the failure's metadata and log under
// <cache>/builds/failed/<index key>/ and returns an Artifact describing it
// together with err.
func (j *job) recordFailure(meta Metadata, err error, start time.Time, logPath, out string) (*Artifact, error) {
	meta.Results.Status = "FAIL"
	meta.Results.Duration["total"] = time.Since(start).Seconds()
	meta.Results.Error = err.Error()
	var ke *KernelError
	var ie *InfraError
	switch {
	case errors.As(err, &ke):
		meta.Results.ErrorKind = "kernel"
		meta.Results.ErrorFile, meta.Results.ErrorLine, meta.Results.ErrorExcerpt = ke.File, ke.Line, ke.Excerpt
		if meta.Results.Errors == 0 {
			meta.Results.Errors = 1
		}
	case errors.As(err, &ie):
		meta.Results.ErrorKind = "infra"
	default:
		meta.Results.ErrorKind = map[fail.Kind]string{fail.KindInput: "input", fail.KindFailed: "kernel", fail.KindInfra: "infra"}[fail.KindOf(err)]
	}
	dir := filepath.Join(j.cache, "failed", j.indexKey[:24])
	os.RemoveAll(dir)
	if os.MkdirAll(dir, 0o755) != nil {
		return nil, err
	}
	a := &Artifact{Dir: dir, Log: filepath.Join(dir, "build.log"), MetadataPath: filepath.Join(dir, "metadata.json"), Meta: meta}
	copyFile(logPath, a.Log)
	if copyBelow(out, ".config", filepath.Join(dir, "config")) == nil {
		a.Config = filepath.Join(dir, "config")
	}
	data, _ := json.MarshalIndent(meta, "", "  ")
	os.WriteFile(a.MetadataPath, append(data, '\n'), 0o644)
	switch {
	case ke != nil:
		ke.Log = a.Log
	case ie != nil && ie.Log != "":
		ie.Log = a.Log
	}
	return a, err
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	o, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, fi.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(o, in); err != nil {
		o.Close()
		return err
	}
	return o.Close()
}

// lockFile takes an exclusive flock on path, waiting until ctx ends; the
// returned func releases it. Concurrent processes building in the same
// workspace serialise here.
func lockFile(ctx context.Context, path string, waiting func()) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fail.Infra(fmt.Errorf("build lock %s: %w", path, err))
	}
	if err := flockWait(ctx, int(f.Fd()), syscall.LOCK_EX, waiting); err != nil {
		f.Close()
		return nil, err
	}
	return func() { gittree.Unlock(int(f.Fd())); f.Close() }, nil
}
