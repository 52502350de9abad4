// Package runner evaluates a patch series with a pipeline, as named stages
// that each take the evaluation's id and the store, find what is already
// done, do the rest and record it:
//
//	Submit  records the evaluation and everything its stages need, the
//	        series resolved from its thread among them (stored.go): no
//	        later stage resolves the thread again
//	Apply   applies the series onto the base (the applied commits)
//	ConfigureKernel
//	        configures and verifies one kernel without compiling it
//	        (Configure: every kernel not built yet)
//	Build   builds one kernel (Builds lists them)
//	Boot    boots one planned boot (Boots lists them, interleaved) with
//	        evaluate.Run, target.New and the store's BootRecorder, the
//	        path `patcheval run` boots through too
//	More    adaptive sampling: the next round's boots, empty when done
//	Report  compares, writes the reports and the reply draft
//
// The stages do not know what follows them: the stage graph (graph.go,
// Next) says, given the step that finished and what it found. Run is
// Submit and a local driver of the graph in one process (`patcheval lore
// --pipeline`); a queue (pipelines/service) drives the same graph with
// the same functions as jobs, possibly in other processes, from the id
// alone. Every stage is idempotent: a finished boot is never redone and
// its samples are never counted twice, so an interrupted evaluation
// resumes where it stopped.
package runner

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/patcheval/patcheval/build"
	"github.com/patcheval/patcheval/evaluate/report"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/gittree"
	"github.com/patcheval/patcheval/internal/progress"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/mbox/numbers"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/artifact"
	"github.com/patcheval/patcheval/pipelines/store"
	"github.com/patcheval/patcheval/series"
	"github.com/patcheval/patcheval/series/recipients"
)

// Env is where stages run.
type Env struct {
	Store *store.Store
	// CacheDir holds builds, agents and boot fragments ("" = the XDG
	// default).
	CacheDir string
	// Jobs is the make -j budget (0: number of CPUs).
	Jobs int
	// CompilerCache is the builds' compiler cache: "kcc" (the default,
	// ""), "ccache" or "none" (build.Options.CompilerCache).
	CompilerCache string
	// Budget, when set, is the -j budget the builds share with the
	// builds running beside them (build.Budget; Jobs is then unused for
	// builds). Run makes one for an evaluation's kernels.
	Budget *build.Budget
	// Slot, when set, is taken by Run around each build (kind "build")
	// and each boot ("boot") and released after it: a process that runs
	// stages as jobs too (a service's watch re-tests and bisection steps)
	// passes its own build and boot slots, so an evaluation run in one
	// job neither builds beyond the process's build workers nor boots
	// beside another boot.
	Slot func(ctx context.Context, kind string) (release func(), err error)
	// Artifacts, when set, is the farm's artifact store
	// (pipelines/artifact): a build puts its artifact directory there and
	// records the manifest; a stage on another machine, where the
	// recorded directory does not exist, fetches it into its cache.
	Artifacts artifact.Store
	// Sources, when set, is a local repository holding commit of
	// evaluation id's tree (tree is the evaluation's recorded path): a
	// farm worker's mirror of the coordinator's tree, fetched over git's
	// smart HTTP. nil: builds read the tree at its recorded path.
	Sources  func(ctx context.Context, id int64, tree, commit string) (string, error)
	Progress *progress.Reporter
	// Record, when non-nil, is called inside the SAME database transaction
	// that records a stage's result (after the stage's own writes), so a
	// queue can enqueue the next stage and complete its job atomically.
	Record func(ctx context.Context, tx *store.Tx) error
	// Queued says a job queue runs the stages and owns the evaluation's
	// status: a stage that fails leaves it as it is (the queue retries an
	// infrastructure error and marks the evaluation failed only when it
	// gives up), instead of marking it failed itself.
	Queued bool
}

func (e Env) progress() *progress.Reporter {
	if e.Progress == nil {
		return progress.Discard()
	}
	return e.Progress
}

// Options are the inputs of one evaluation besides the Pipeline.
type Options struct {
	// Mbox is the thread holding the series (mbox.WriteMboxrd of its
	// messages' Raw); nil when no variant applies a series. Version picks
	// the series' version (0: the newest), AnySender accepts trailers from
	// any sender, ThreadSource names where the thread came from.
	Mbox         []byte
	Version      int
	AnySender    bool
	ThreadSource string
	// ThreadNumbers are numbers reported in related threads (lore
	// --thread-numbers: the upstream thread of a backport), set beside the
	// results like the series' own thread's.
	ThreadNumbers []numbers.Number `json:"thread_numbers,omitempty"`
	// AM shapes the commit messages (Link: trailer).
	AM series.AMOptions
	// Tree is the kernel git repository; it overrides the pipeline's
	// tree.path. Base overrides tree.base. Branch receives the applied
	// series (default patcheval/<pipeline>).
	Tree, Base, Branch string
	// Fuzz and ThreeWay are apply's options (see series/apply).
	Fuzz     int
	ThreeWay bool
	// Cover adds the Kconfig symbols that would build the series' C files
	// to every kernel (a fragment written when the series is applied).
	Cover bool
	// PerPatch asks a queue that runs the stages (pipelines/service) to
	// measure the series patch by patch after the report
	// (pipelines/experiments/perpatch), as `lore --per-patch` does. It is not part of
	// the evaluation's key: the whole-series evaluation is the same, and
	// the same series submitted again with it adds the per-patch run.
	PerPatch bool `json:"per_patch,omitempty"`
	// RevertIfMerged: when the base already has the whole series (every
	// patch's reverse applies cleanly), measure the base with the series
	// reverted (the variants without the series) against the base as it
	// is (those with it) instead of refusing (pipelines.SeriesReverted).
	RevertIfMerged bool `json:"revert_if_merged,omitempty"`
	// KeepGoing drops the variants whose kernels cannot be configured
	// (the report says which and why) and evaluates the others; without
	// it such a variant stops the evaluation before anything compiles.
	// Not part of the evaluation's key.
	KeepGoing bool `json:"keep_going,omitempty"`
	// Boots overrides repeats.boots when > 0 (a quick run).
	Boots int
	// From signs the reply draft; TestedBy asks for a Tested-by trailer
	// (added only when nothing regressed).
	From     mbox.Address
	TestedBy bool
	// Recipients, when set (a bot's evaluation, pipelines/bots/follow),
	// addresses the reply draft to the series' author, its list and the
	// maintainers of the files it touches, each by its setting, instead
	// of replying to everybody on the thread; nil: reply-all.
	Recipients *recipients.Policy `json:"recipients,omitempty"`
	// Lore is the public-inbox base the Link: of the report points into
	// (default mbox.DefaultLore).
	Lore string
	// Fetch is how long fetching the thread took (a stage timing).
	Fetch time.Duration
	// Now pins the report's and the draft's dates (tests); zero: now.
	Now time.Time
	// OutDir is where Run has Report write (not stored: a machine-side
	// path).
	OutDir string `json:"-"`
	// Resolved is the series the entry point resolved from Mbox
	// (Resolve): Submit stores it instead of resolving the thread again
	// (when it was resolved from this Mbox, ThreadSource, AnySender and
	// Version). nil: Submit resolves the thread. Not stored as an input:
	// the store keeps the series itself.
	Resolved *Resolved `json:"-"`
}

// ThreadMbox is Options.Mbox for a fetched thread.
func ThreadMbox(t *mbox.Thread) []byte {
	var raws [][]byte
	for _, m := range t.Messages {
		raws = append(raws, m.Raw)
	}
	var buf bytes.Buffer
	_ = mbox.WriteMboxrd(&buf, raws...) // a bytes.Buffer does not fail
	return buf.Bytes()
}

// inputs is what Submit stores: everything a stage needs besides Env.
type inputs struct {
	// Pipeline is the pipeline as evaluated (its JSON model: also a
	// Pipeline changed after parsing, as bisect's single-benchmark copy,
	// runs as it was submitted); PipelineSource the text it was parsed
	// from, for people.
	Pipeline       json.RawMessage `json:"pipeline"`
	PipelineSource string          `json:"pipeline_source,omitempty"`
	PipelineFile   string          `json:"pipeline_file"`
	PipelineDir    string          `json:"pipeline_dir,omitempty"`
	Warnings       []string        `json:"pipeline_warnings,omitempty"`
	// Notes are what Apply found about the series (files no kernel
	// builds, --cover's symbols); the report lists them.
	Notes []string `json:"notes,omitempty"`
	Options
	// Mbox travels in its own column.
	BaseHash string `json:"base_hash"`
	// BaseRef names the chosen base as it was asked ("v7.2.13", "HEAD
	// (master)"); BaseRule is the rule that chose it (gittree.Rule*),
	// BaseWhy the sentence the report prints. Options.Base stays --base.
	BaseRef  string `json:"base_ref,omitempty"`
	BaseRule string `json:"base_rule,omitempty"`
	BaseWhy  string `json:"base_why,omitempty"`
	// Files are the pipeline's files (base config, fragments, the cover
	// fragment) by path, as keys in Env.Artifacts (files.go); none
	// without a store.
	Files artifact.Manifest `json:"files,omitempty"`
	// Trees are the variants whose kernels build a tree of their own (a
	// ref, reverts), by variant name.
	Trees map[string]VariantTree `json:"trees,omitempty"`
	// Merged says that the base already has the series and what
	// --revert-if-merged measured instead (the report and the draft
	// say it first).
	Merged string `json:"merged,omitempty"`
}

// evaluation is a stored evaluation loaded for a stage.
type evaluation struct {
	id     int64
	p      *pipelines.Pipeline
	in     inputs
	series *series.Series // nil without a series
	// thread are the numbers the series' thread reports, read with the
	// series when haveThread; without, Report reads them from in.Mbox.
	thread     []numbers.Number
	haveThread bool
}

// Outcome is what an evaluation produced.
type Outcome struct {
	EvaluationID int64          `json:"evaluation_id"`
	Resumed      bool           `json:"resumed"`
	Report       *report.Report `json:"report"`
	// Files written into the output directory.
	Text, JSON, Markdown, KCIDB, Draft string
	// Mail is the reply draft (nil without a message to answer, or when
	// Options.Recipients leaves nobody to send it to); Report only writes
	// it to Draft, it never sends it.
	Mail *report.Draft `json:"-"`
	// Addressing says, with Options.Recipients, who the draft is for and
	// who was left out (and why).
	Addressing *recipients.Addressing `json:"addressing,omitempty"`
	// Regressions are the comparisons that found a regression.
	Regressions []string `json:"regressions,omitempty"`
	// Failed are the boots that failed (kept going; listed in the report).
	Failed []string `json:"failed_boots,omitempty"`
	// Adaptive says, per comparison and metric, why adaptive sampling
	// stopped (repeats.max_boots > boots).
	Adaptive []string `json:"adaptive,omitempty"`
}

// Submit records the evaluation of p with o and everything its stages
// need, so that any stage can run later from the id alone. The same inputs
// give the existing evaluation (resumed), never a second one: the key names
// what is evaluated (pipeline, base commit, the series' patches and
// version, boots, apply options), not when or who signs the draft.
func Submit(ctx context.Context, env Env, p *pipelines.Pipeline, o Options) (id int64, resumed bool, err error) {
	in, r, p, err := check(ctx, p, o)
	if err != nil {
		return 0, false, err
	}
	if err := storeFiles(ctx, env, &in, p); err != nil {
		return 0, false, err
	}
	resolved := storedForm(ctx, in, r, o.Resolved)
	mboxData := in.Mbox
	in.Mbox = nil
	data, err := json.Marshal(in)
	if err != nil {
		return 0, false, fail.Infraf("evaluation inputs: %w", err)
	}
	meta, key := keyOf(p, in, r.get())
	err = env.Store.Tx(ctx, func(tx *store.Tx) error {
		if id, resumed, err = env.Store.CreateOrResumeEvaluationTx(tx, key, meta); err != nil {
			return err
		}
		if err := env.Store.SetInputsTx(tx, id, data, mboxData); err != nil {
			return err
		}
		if err := env.Store.SetResolvedSeriesTx(tx, id, resolved); err != nil {
			return err
		}
		if o.Fetch > 0 && !resumed {
			if err := env.Store.AddTimingTx(tx, id, "fetch", o.Fetch, ""); err != nil {
				return err
			}
		}
		return record(ctx, env, tx)
	})
	return id, resumed, err
}

// Check reports what Submit would refuse in p and o (no tree, no series,
// a base the tree lacks) without touching a store.
func Check(p *pipelines.Pipeline, o Options) error {
	_, _, _, err := check(context.Background(), p, o)
	return err
}

func check(ctx context.Context, p *pipelines.Pipeline, o Options) (in inputs, r *resolvedSeries, _ *pipelines.Pipeline, err error) {
	in = inputs{PipelineSource: string(p.Source), PipelineFile: p.File, PipelineDir: p.Dir, Warnings: p.Warnings, Options: o}
	if o.Boots < 0 || o.Boots > pipelines.MaxBoots {
		return in, nil, p, fail.Inputf("--boots %d: want 1 to %d boots per variant", o.Boots, pipelines.MaxBoots)
	}
	if msg := p.CheckRuns(o.Boots); o.Boots > 0 && msg != "" {
		return in, nil, p, fail.Inputf("--boots %d: %s: %s", o.Boots, p.File, msg)
	}
	if in.Tree == "" {
		in.Tree = p.Tree.Path
	}
	if in.Tree == "" {
		return in, nil, p, fail.Inputf("%s: no kernel tree: pass --tree PATH (scripts/linux-tree.sh imports Debian's 6.1 tree)", p.File)
	}
	if in.Branch == "" {
		in.Branch = "patcheval/" + p.Name
	}
	if o.Recipients != nil {
		if err := o.Recipients.Validate(); err != nil {
			return in, nil, p, err
		}
	}
	if in.Pipeline, err = json.Marshal(p); err != nil {
		return in, nil, p, fail.Inputf("pipeline %s: %v", p.Name, err)
	}
	if p.NeedsSeries() || p.RevertsSeries() {
		if len(o.Mbox) == 0 && p.NeedsSeries() {
			return in, nil, p, fail.Inputf("pipeline %s applies a series but none was given", p.Name)
		}
		if len(o.Mbox) == 0 {
			return in, nil, p, fail.Inputf("pipeline %s reverts a series (msgid:) but no thread was given: patcheval lore <msgid> --pipeline ...", p.Name)
		}
		if r = o.Resolved.reuse(in); r == nil {
			if r, err = resolveSeries(ctx, in); err != nil {
				return in, nil, p, err
			}
		}
		in.Version = r.series.Version // the chosen one, also when "newest" was asked
	}
	s := r.get()
	choice := gittree.BaseChoice{Flag: o.Base, Pipeline: p.Tree.Base}
	if s != nil {
		choice.Series = s.Base.Commit
	}
	b, err := gittree.ChooseBaseAt(in.Tree, choice)
	if err != nil {
		return in, r, p, err
	}
	in.BaseRef, in.BaseHash, in.BaseRule, in.BaseWhy = b.Ref, b.Hash, b.Rule, b.Why
	if in.RevertIfMerged && !p.NeedsSeries() {
		// Nothing to turn into "the base with the series reverted
		// against the base as it is": saying nothing would measure the
		// base alone as if the flag had been honoured.
		return in, r, p, fail.Inputf("--revert-if-merged: pipeline %s applies no series (no variant with apply_series), so there is no pair to make the base with the series reverted against the base as it is; use a pipeline with one, e.g. default or rcu-gp-qs", p.Name)
	}
	if s != nil && p.NeedsSeries() {
		if p, err = merged(ctx, p, &in, s); err != nil {
			return in, r, p, err
		}
	}
	if in.Trees, err = variantTrees(ctx, p, in, s); err != nil {
		return in, r, p, err
	}
	return in, r, p, nil
}

// baseName is how the evaluation's base was asked for (evaluations stored
// before the base rule have only Options.Base).
func (in inputs) baseName() string {
	if in.BaseRef != "" {
		return in.BaseRef
	}
	return in.Base
}

// keyOf is the evaluation's description and key.
func keyOf(p *pipelines.Pipeline, in inputs, s *series.Series) (store.EvaluationMeta, string) {
	meta := store.EvaluationMeta{Pipeline: p.Name, Tree: in.Tree, Base: in.BaseHash}
	parts := []string{p.Hash(), in.BaseHash}
	if s != nil {
		meta.SeriesTitle, meta.SeriesVersion = s.Title, s.Version
		if m := s.First(); m != nil {
			meta.SeriesMsgID = m.MessageID
		}
		// The patches' diffs decide the patched tree (the commit hashes
		// change with every re-apply, trailers do not change the tree).
		h := sha256.New()
		for _, pt := range s.Patches {
			if pt != nil {
				fmt.Fprintf(h, "%d\n%s\n", len(pt.Diff), pt.Diff)
			}
		}
		parts = append(parts, hex.EncodeToString(h.Sum(nil)), meta.SeriesMsgID, fmt.Sprint(s.Version))
	}
	if in.Boots > 0 {
		parts = append(parts, fmt.Sprintf("boots=%d", in.Boots))
	}
	if in.Fuzz > 0 || in.ThreeWay {
		parts = append(parts, fmt.Sprintf("fuzz=%d 3way=%v", in.Fuzz, in.ThreeWay))
	}
	if in.Cover {
		parts = append(parts, "cover")
	}
	parts = append(parts, treeKeyParts(in.Trees)...)
	return meta, store.Key(parts...)
}

// storedForm is what Submit stores of in's series beside its thread: r
// (check resolved it) in its stored form, or, for a pipeline that does
// not apply the series but was run on a thread (lore --pipeline <msgid>
// with the default pipeline), the series resolved here for those who
// name it (Load, GraphOf). nil stores none: no thread, a thread without
// a series, or a series JSON cannot carry as it is (the stages then
// resolve the thread as evaluations stored before the resolved series
// do). handed is the series the entry point resolved (Options.Resolved),
// taken when it is in's.
func storedForm(ctx context.Context, in inputs, r *resolvedSeries, handed *Resolved) []byte {
	if r == nil && len(in.Mbox) > 0 {
		if r = handed.reuse(in); r == nil {
			r, _ = resolveSeries(ctx, in)
		}
	}
	if r == nil {
		return nil
	}
	data, err := r.marshal()
	if err != nil {
		return nil
	}
	return data
}

// load reads evaluation id's inputs back with its series: the pipeline
// parsed again from its source, the series as Submit resolved and stored
// it (loadSeries). Stages that do not read the series use loadInputs.
func load(env Env, id int64) (*evaluation, error) {
	ev, err := loadInputs(env.Store, id)
	if err != nil {
		return nil, err
	}
	if ev.p.NeedsSeries() || (ev.p.RevertsSeries() && len(ev.in.Mbox) > 0) {
		if err := ev.loadSeries(env.Store); err != nil {
			return nil, fmt.Errorf("evaluation %d: stored series: %w", id, err)
		}
	}
	return ev, nil
}

// loadSeries reads ev's series as Submit stored it; an evaluation stored
// without it (by a patcheval before the resolved series) has its thread
// resolved again, as then.
func (ev *evaluation) loadSeries(st *store.Store) error {
	data, err := st.ResolvedSeries(ev.id)
	if err != nil {
		return err
	}
	var r *resolvedSeries
	if len(data) > 0 {
		if r, err = unmarshalSeries(data); err != nil {
			return fail.Infraf("resolved series: %w", err)
		}
	} else if r, err = resolveSeries(context.Background(), ev.in); err != nil {
		return err
	}
	ev.series, ev.thread, ev.haveThread = r.series, r.thread, true
	return nil
}

// loadInputs is load without the series: the stages that do not read it
// (configure, build, plan, boot, more).
func loadInputs(st *store.Store, id int64) (*evaluation, error) {
	data, mboxData, err := st.Inputs(id)
	if err != nil {
		return nil, err
	}
	ev := &evaluation{id: id}
	if err := json.Unmarshal(data, &ev.in); err != nil {
		return nil, fail.Infraf("evaluation %d: stored inputs: %w", id, err)
	}
	ev.in.Mbox = mboxData
	ev.p = &pipelines.Pipeline{}
	if err := json.Unmarshal(ev.in.Pipeline, ev.p); err != nil {
		return nil, fail.Infraf("evaluation %d: stored pipeline: %w", id, err)
	}
	ev.p.File, ev.p.Dir, ev.p.Warnings = ev.in.PipelineFile, ev.in.PipelineDir, ev.in.Warnings
	return ev, nil
}

// record calls env.Record inside tx.
func record(ctx context.Context, env Env, tx *store.Tx) error {
	if env.Record == nil {
		return nil
	}
	return env.Record(ctx, tx)
}

// keep is the context a stage records its finished work with: SIGINT
// (which cancels ctx) arriving after the work is done must not throw it
// away. The queue's Record hook still gets ctx: a cancelled job enqueues
// nothing, and its failing insert rolls the record back with it.
func keep(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }

// failed marks the evaluation failed when a stage ends with an error that
// is not a cancellation (the caller's defer), unless a queue owns its
// status (Env.Queued).
func failed(ctx context.Context, env Env, id int64, err *error) {
	if *err != nil && ctx.Err() == nil && !env.Queued {
		_ = env.Store.SetEvaluationStatus(id, store.StatusFailed)
	}
}

// Run submits the evaluation and walks its stage graph (Next) in this
// process: apply, build, boot (resuming from the store), sample more
// (adaptive), report into o.OutDir. Every finished boot is committed
// before the next starts, so an interrupted evaluation loses nothing:
// running it again resumes it.
func Run(ctx context.Context, env Env, p *pipelines.Pipeline, o Options) (*Outcome, error) {
	return RunWith(ctx, env, p, o, FollowUps{})
}

// FollowUps are the steps after the report that a local run also takes
// (`patcheval lore --pipeline --per-patch`, the bisection inside the
// series): Graph's PerPatch and SeriesBisect, and Run, which takes
// StagePerPatch and StageSeriesBisect with the report's outcome.
type FollowUps struct {
	PerPatch, SeriesBisect bool
	Run                    func(ctx context.Context, step Step, out *Outcome) (Found, error)
}

// RunWith is Run with follow-ups after the report.
func RunWith(ctx context.Context, env Env, p *pipelines.Pipeline, o Options, f FollowUps) (*Outcome, error) {
	if o.OutDir == "" {
		return nil, fail.Inputf("pipeline %s: no output directory", p.Name)
	}
	id, resumed, err := Submit(ctx, env, p, o)
	if err != nil {
		return nil, err
	}
	out := &Outcome{EvaluationID: id, Resumed: resumed}
	if resumed {
		if ev, err := env.Store.Evaluation(id); err == nil {
			env.progress().Printf("resuming evaluation %d (%d boot(s) already finished)", id, ev.FinishedRuns)
		}
	}
	l := &local{env: env, id: id, outDir: o.OutDir, keepGoing: o.KeepGoing, follow: f.Run, out: out,
		graph: Graph{MaxRound: MaxRound(p.Repeats.MaxBoots), PerPatch: f.PerPatch, SeriesBisect: f.SeriesBisect}}
	err = l.drive(ctx)
	return l.out, err
}

// local is the local driver of evaluation id's stage graph: it takes the
// steps Next names one at a time, in order, except a round of configures,
// which it takes together (configureFirst: with keepGoing, the variants
// that cannot be configured are dropped), and a round of builds, which it
// builds together within one -j budget (buildAll).
type local struct {
	env       Env
	id        int64
	outDir    string
	keepGoing bool
	graph     Graph
	follow    func(ctx context.Context, step Step, out *Outcome) (Found, error)
	out       *Outcome
}

func (l *local) drive(ctx context.Context) error {
	queue := []Step{{Stage: StageApply}}
	for len(queue) > 0 {
		step := queue[0]
		if step.Stage == StageConfigure || step.Stage == StageBuild {
			var keys []string
			for len(queue) > 0 && queue[0].Stage == step.Stage {
				keys = append(keys, queue[0].Key)
				queue = queue[1:]
			}
			found, err := l.round(ctx, step.Stage, keys)
			if err != nil {
				return err
			}
			queue = append(queue, Next(l.graph, step, found)...)
			continue
		}
		queue = queue[1:]
		if step.Stage == StageDone {
			continue
		}
		found, err := l.take(ctx, step)
		if err != nil {
			return err
		}
		queue = append(queue, Next(l.graph, step, found)...)
	}
	return nil
}

// round takes a round of configures (every kernel of keys configured
// before any compiles; Found.Kernels the kernels left to build) or of
// builds (all of keys built together) as one step: the last of its round.
func (l *local) round(ctx context.Context, stage Stage, keys []string) (Found, error) {
	if stage == StageConfigure {
		keys, err := configureFirst(ctx, l.env, l.id, keys, l.keepGoing)
		return Found{Kernels: keys}, err
	}
	return Found{}, buildAll(ctx, l.env, l.id, keys)
}

// take takes one step (not a configure or a build) and says what it
// found.
func (l *local) take(ctx context.Context, step Step) (Found, error) {
	env, id := l.env, l.id
	switch step.Stage {
	case StageApply:
		if err := Apply(ctx, env, id); err != nil {
			return Found{}, err
		}
		keys, err := Builds(ctx, env, id)
		return Found{Kernels: keys}, err
	case StagePlan:
		boots, err := Boots(ctx, env, id)
		return Found{Boots: boots}, err
	case StageBoot:
		return Found{}, slotted(ctx, env, "boot", func() error { return Boot(ctx, env, id, step.Boot) })
	case StageMore:
		boots, err := More(ctx, env, id)
		return Found{Boots: boots}, err
	case StageReport:
		env.progress().Done()
		res, err := Report(ctx, env, id, l.outDir)
		if res != nil {
			res.Resumed = l.out.Resumed
			l.out = res
		}
		return Found{Bisect: true}, err
	}
	if l.follow == nil {
		return Found{}, fail.Infraf("evaluation %d: no driver for step %s", id, step)
	}
	return l.follow(ctx, step, l.out)
}

// slotted runs fn holding env's slot of kind (without one: just fn).
func slotted(ctx context.Context, env Env, kind string, fn func() error) error {
	if env.Slot == nil {
		return fn()
	}
	release, err := env.Slot(ctx, kind)
	if err != nil {
		return fail.Infra(err)
	}
	defer release()
	return fn()
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// Stored is an evaluation's inputs as Submit recorded them.
type Stored struct {
	ID       int64
	Pipeline *pipelines.Pipeline
	// PipelineSource is the TOML text the pipeline was parsed from (""
	// for one made in code, e.g. the default pipeline); PipelineFile
	// where it was read.
	PipelineSource, PipelineFile string
	// Options hold the thread (Mbox) and every option of the evaluation.
	Options Options
	// BaseHash is the base commit the series was applied to; BaseRef
	// how it was named ("v7.2.13", "HEAD (master)"), BaseWhy the rule
	// that chose it.
	BaseHash, BaseRef, BaseWhy string
	// Series is the series as Submit resolved it from the thread (nil
	// without one), also when the pipeline does not apply it.
	Series *series.Series
	// Trees are the variants' own trees (refs, reverts), by variant.
	Trees map[string]VariantTree
}

// Load reads evaluation id's stored inputs (for a reproducer).
func Load(st *store.Store, id int64) (*Stored, error) {
	ev, err := load(Env{Store: st}, id)
	if err != nil {
		return nil, err
	}
	if ev.series == nil && len(ev.in.Mbox) > 0 {
		// A pipeline that does not apply the series was still run on
		// one (lore --pipeline <msgid>): name it.
		_ = ev.loadSeries(st)
	}
	return &Stored{ID: id, Pipeline: ev.p, PipelineSource: ev.in.PipelineSource, PipelineFile: ev.in.PipelineFile,
		Options: ev.in.Options, BaseHash: ev.in.BaseHash, BaseRef: ev.in.baseName(), BaseWhy: ev.in.BaseWhy, Series: ev.series, Trees: ev.in.Trees}, nil
}
