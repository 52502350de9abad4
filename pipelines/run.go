package pipelines

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/patcheval/patcheval/build"
	"github.com/patcheval/patcheval/build/kconfig"
	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/evaluate/qemu"
	"github.com/patcheval/patcheval/evaluate/report"
	"github.com/patcheval/patcheval/evaluate/ssh"
	"github.com/patcheval/patcheval/evaluate/stats"
	"github.com/patcheval/patcheval/evaluate/store"
	"github.com/patcheval/patcheval/evaluate/userland"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/progress"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/series"
	"github.com/patcheval/patcheval/series/apply"
)

// RunOptions are the inputs of one evaluation besides the Pipeline.
type RunOptions struct {
	// Series is the resolved series (nil when no variant applies one);
	// Answer is the message the reply draft answers (default: the cover
	// letter, else the first patch).
	Series *series.Series
	Answer *mbox.Message
	// AM shapes the commit messages (Link: trailer).
	AM series.AMOptions
	// Repo is the kernel git repository; it overrides the pipeline's
	// tree.path. Base overrides tree.base. Branch receives the applied
	// series (default patcheval/<pipeline>).
	Repo, Base, Branch string
	// OutDir receives report.txt, report.json, report.md, kcidb.json and
	// reply.eml.
	OutDir string
	// StorePath is the SQLite database ("" = the XDG default).
	StorePath string
	// CacheDir holds builds and agents ("" = the XDG default).
	CacheDir string
	// Jobs is the make -j budget (0: number of CPUs).
	Jobs int
	// Boots overrides repeats.boots when > 0 (a quick run).
	Boots int
	// From signs the reply draft; TestedBy asks for a Tested-by trailer
	// (added only when nothing regressed).
	From     mbox.Address
	TestedBy bool
	// Fetch is how long fetching the thread took (a stage timing).
	Fetch    time.Duration
	Progress *progress.Reporter
	// Now pins the draft's Date (tests); zero: now.
	Now time.Time
	// Cover adds the Kconfig symbols that would build the series' C files
	// to every kernel (a fragment, fragments/cover.config in OutDir).
	Cover bool
}

// Outcome is what an evaluation produced.
type Outcome struct {
	EvaluationID int64          `json:"evaluation_id"`
	Resumed      bool           `json:"resumed"`
	Report       *report.Report `json:"report"`
	// Files written into RunOptions.OutDir.
	Text, JSON, Markdown, KCIDB, Draft string
	// Mail is the reply draft (nil without a message to answer); it is
	// only written to Draft, never sent, by Run.
	Mail *report.Draft `json:"-"`
	// Regressions are the comparisons that found a regression.
	Regressions []string `json:"regressions,omitempty"`
	// Failed are the boots that failed (kept going; listed in the report).
	Failed []string `json:"failed_boots,omitempty"`
	// Adaptive says, per comparison and metric, why adaptive sampling
	// stopped (repeats.max_boots > boots).
	Adaptive []string `json:"adaptive,omitempty"`
}

// watched are derived symbols the confound report always lists first:
// they change how the kernel behaves under benchmarks although nobody asked
// for them (the seed thread's PREEMPT_RCU).
var watched = map[string]bool{
	"PREEMPT_RCU": true, "PREEMPTION": true, "PREEMPT_BUILD": true, "PREEMPT_COUNT": true,
	"PREEMPT_DYNAMIC": true, "TASKS_RCU": true, "DEBUG_PREEMPT": true, "RCU_EXPERT": true,
	"NO_HZ_FULL": true, "HZ": true, "SECURITY_SELINUX": true,
}

// Run walks the stages of p for one series: apply, build, boot and
// benchmark (resuming from the store), compare and report. Every finished
// boot is committed to the store before the next starts, so an interrupted
// evaluation loses nothing: running it again resumes it.
func Run(ctx context.Context, p *Pipeline, o RunOptions) (*Outcome, error) {
	pr := o.Progress
	if pr == nil {
		pr = progress.Discard()
	}
	repo := o.Repo
	if repo == "" {
		repo = p.Tree.Path
	}
	if repo == "" {
		return nil, fail.Inputf("%s: no kernel tree: pass --tree PATH (scripts/linux-tree.sh imports Debian's 6.1 tree)", p.File)
	}
	baseRef := o.Base
	if baseRef == "" {
		baseRef = p.Tree.Base
	}
	if p.NeedsSeries() && o.Series == nil {
		return nil, fail.Inputf("pipeline %s applies a series but none was given", p.Name)
	}
	if o.Branch == "" {
		o.Branch = "patcheval/" + p.Name
	}
	if o.OutDir == "" {
		return nil, fail.Inputf("pipeline %s: no output directory", p.Name)
	}
	if err := os.MkdirAll(o.OutDir, 0o755); err != nil {
		return nil, fail.Infra(err)
	}
	var timings []report.StageTiming
	if o.Fetch > 0 {
		timings = append(timings, report.StageTiming{Stage: "fetch", Duration: o.Fetch})
	}

	baseHash, err := resolveCommit(repo, baseRef)
	if err != nil {
		return nil, err
	}

	// Apply.
	tree := report.TreeInfo{Path: repo, Base: baseHash, BaseName: baseRef}
	if baseRef == DefaultBase {
		tree.Name = "Debian linux-source-6.1"
	}
	patched, patchedTree := "", ""
	if p.NeedsSeries() {
		start := time.Now()
		pr.Status("applying %d patch(es) onto %s", len(o.Series.Patches), baseRef)
		res, err := apply.Apply(ctx, repo, apply.FromSeries(o.Series, o.AM), apply.Options{
			Base:       baseHash,
			SeriesBase: o.Series.Base.Commit,
			Branch:     o.Branch,
		})
		if err != nil {
			return nil, err
		}
		patched = res.Head
		if n := len(res.Commits); n > 0 {
			patchedTree = res.Commits[n-1].Tree
		}
		for _, c := range res.Commits {
			tree.Commits = append(tree.Commits, report.Commit{Hash: c.Hash, Subject: c.Label})
		}
		timings = append(timings, report.StageTiming{Stage: "apply", Duration: time.Since(start),
			Note: fmt.Sprintf("branch %s", res.Branch)})
		pr.Printf("applied %d patch(es) on %s: %s (%s)", len(res.Commits), baseRef, short(res.Head), res.Branch)
	}

	var seriesNotes []string
	if o.Series != nil {
		for _, w := range p.SeriesWarnings(SeriesFiles(o.Series)) {
			pr.Printf("warning: %s", w)
			seriesNotes = append(seriesNotes, w)
		}
	}
	if o.Cover && patched != "" {
		cp, note, err := withCover(p, repo, patched, SeriesFiles(o.Series), filepath.Join(o.OutDir, "fragments"))
		if err != nil {
			return nil, err
		}
		p = cp
		if note != "" {
			pr.Printf("%s", note)
			seriesNotes = append(seriesNotes, note)
		}
	}

	// Store.
	st, err := store.Open(o.StorePath)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	meta := store.EvaluationMeta{Pipeline: p.Name, Tree: repo, Base: baseHash}
	// The key names what is evaluated, not when: the patched tree (the
	// commit hash changes with the committer date of every re-apply).
	keyParts := []string{p.Hash(), baseHash, patchedTree}
	if o.Series != nil {
		meta.SeriesTitle, meta.SeriesVersion = o.Series.Title, o.Series.Version
		if m := firstMessage(o.Series); m != nil {
			meta.SeriesMsgID = m.MessageID
		}
		keyParts = append(keyParts, meta.SeriesMsgID, fmt.Sprint(o.Series.Version))
	}
	if o.Boots > 0 {
		keyParts = append(keyParts, fmt.Sprintf("boots=%d", o.Boots))
	}
	ev, resumed, err := st.CreateOrResumeEvaluation(store.Key(keyParts...), meta)
	if err != nil {
		return nil, err
	}
	out := &Outcome{EvaluationID: ev.ID, Resumed: resumed}
	if resumed {
		pr.Printf("resuming evaluation %d (%d boot(s) already finished)", ev.ID, ev.FinishedRuns)
	}
	failEval := func(err error) (*Outcome, error) {
		_ = st.SetEvaluationStatus(ev.ID, store.StatusFailed)
		return out, err
	}

	// Build.
	start := time.Now()
	specs := p.Builds()
	fragDir := filepath.Join(o.OutDir, "fragments")
	reqs := make([]build.Request, len(specs))
	for i, s := range specs {
		commit := baseHash
		if s.ApplySeries {
			commit = patched
		}
		req := build.Request{Repo: repo, Commit: commit, Arch: s.Arch, BaseConfig: p.BaseConfig,
			Symbols: s.Symbols, Variant: s.Variant}
		for _, f := range s.Fragments {
			if f.Path != "" {
				req.Fragments = append(req.Fragments, f.Path)
				continue
			}
			path, err := build.WriteBootConfig(s.Arch, fragDir)
			if err != nil {
				return failEval(fail.Infra(err))
			}
			req.Fragments = append(req.Fragments, path)
		}
		reqs[i] = req
	}
	pr.Status("building %d kernel(s)", len(reqs))
	arts, errs := build.BuildAll(ctx, reqs, build.Options{CacheDir: o.CacheDir, Jobs: o.Jobs, Progress: pr, NoNetwork: true})
	byKey := map[string]*build.Artifact{}
	var buildErrs []error
	var cached int
	for i, s := range specs {
		b := store.Build{Variant: s.Variant, Arch: s.Arch, Commit: reqs[i].Commit, Status: "ok"}
		if a := arts[i]; a != nil {
			b.ConfigHash, b.ArtifactDir = a.ConfigHash(), a.Dir
			if a.CacheHit {
				cached++
			}
		}
		if errs[i] != nil {
			b.Status, b.ErrorKind, b.ErrorText = "failed", fail.KindOf(errs[i]).String(), errs[i].Error()
			buildErrs = append(buildErrs, fmt.Errorf("%s/%s: %w", s.Arch, s.Variant, errs[i]))
		} else {
			byKey[s.Key] = arts[i]
			pr.Printf("built %s/%s: %s%s", s.Arch, s.Variant, arts[i].Image, map[bool]string{true: " (cached)"}[arts[i].CacheHit])
		}
		if _, err := st.RecordBuild(ev.ID, b); err != nil {
			return failEval(err)
		}
	}
	timings = append(timings, report.StageTiming{Stage: "build", Duration: time.Since(start),
		Note: fmt.Sprintf("%d kernel(s), %d cached", len(specs), cached)})
	if len(buildErrs) > 0 {
		return failEval(buildErrs[0])
	}

	// Boot and benchmark.
	done, err := st.FinishedRuns(ev.ID)
	if err != nil {
		return failEval(err)
	}
	runs := p.runs(0, effectiveBoots(p, o))
	// The users' tools (stress-ng, perf) for each guest arch: Debian's
	// packages, unpacked once and cached by content (evaluate/userland).
	lands := map[string]*userland.Userland{}
	if tools := p.Tools(); len(tools) > 0 && p.Target.Kind != "ssh" {
		start := time.Now()
		for _, a := range p.Arches {
			pr.Status("guest userland for %s: %s", a, strings.Join(tools, ", "))
			u, err := userland.Build(ctx, a, tools, o.CacheDir, nil)
			if err != nil {
				return failEval(err)
			}
			lands[a] = u
			pr.Printf("guest userland %s: %s (%d files, %d KiB%s)", a, userlandVersions(u), len(u.Files), u.Bytes>>10,
				map[bool]string{true: ", cached"}[u.Cached])
		}
		timings = append(timings, report.StageTiming{Stage: "userland", Duration: time.Since(start), Note: strings.Join(tools, ", ")})
	}
	envs := map[string]evaluate.Environment{}
	var bootTime, benchTime time.Duration
	// boot runs one planned boot unless the store has it; the error is
	// fatal for the evaluation (a failed boot that is not is recorded in
	// out.Failed and the walk goes on).
	boot := func(rp RunPlan, label string) error {
		if err := ctx.Err(); err != nil {
			return fail.Infra(err)
		}
		if done[store.RunKey{Variant: rp.Variant, Boot: rp.Boot}] {
			return nil
		}
		art := byKey[rp.BuildKey]
		if art == nil {
			return fail.Infraf("run %s boot %d: no kernel for build %s", rp.Variant, rp.Boot, rp.BuildKey)
		}
		k := evaluate.Kernel{Variant: rp.Variant, Arch: rp.Arch, Image: art.Image, SystemMap: art.SystemMap,
			Config: art.Config, ConfigHash: art.ConfigHash(), Commit: art.Meta.Git.Commit, Cmdline: rp.Cmdline}
		tgt, err := newTarget(rp, o.CacheDir, lands[rp.Arch])
		if err != nil {
			return err
		}
		pr.Status("boot %s: %s #%d on %s", label, rp.Variant, rp.Boot+1, tgt.Name())
		runID, err := st.BeginRun(ev.ID, rp.Variant, rp.Boot)
		if err != nil {
			return err
		}
		res, bootErr := tgt.Boot(ctx, k, rp.Plan)
		var samples []evaluate.Sample
		var env evaluate.Environment
		var console []byte
		status := store.RunOK
		if res != nil {
			samples, _ = evaluate.Samples(rp.Variant, rp.Boot, res)
			env, console = res.Env, res.Console
			bootTime += res.FirstResult
			benchTime += res.Duration - res.FirstResult
		}
		if bootErr != nil {
			status = store.RunFailed
			if fail.KindOf(bootErr) == fail.KindInfra {
				status = store.RunInfra
			}
			var be *evaluate.BootError
			if errors.As(bootErr, &be) && console == nil {
				console = be.Console
			}
		}
		if err := st.FinishRunErr(runID, status, env, console, samples, bootErr); err != nil {
			return err
		}
		if bootErr != nil {
			if ctx.Err() != nil {
				return fail.Infra(ctx.Err())
			}
			out.Failed = append(out.Failed, fmt.Sprintf("%s boot %d: %v", rp.Variant, rp.Boot+1, bootErr))
			pr.Printf("boot %s #%d failed: %v", rp.Variant, rp.Boot+1, firstLine(bootErr.Error()))
			if status == store.RunFailed {
				// A kernel that panics or whose agent fails is the thing
				// under test failing: stop here, the rest would fail too.
				return bootErr
			}
			return nil
		}
		envs[rp.Variant] = env
		pr.Printf("boot %s #%d: %s", rp.Variant, rp.Boot+1, sampleLine(samples))
		return nil
	}
	for i, rp := range runs {
		if err := boot(rp, fmt.Sprintf("%d/%d", i+1, len(runs))); err != nil {
			return failEval(err)
		}
	}
	// Adaptive sampling: more interleaved boots of the variants whose
	// comparisons are not clear yet, up to repeats.max_boots.
	var adaptive *adaptiveState
	if planned := effectiveBoots(p, o); p.Repeats.MaxBoots > planned {
		adaptive = &adaptiveState{min: planned, max: p.Repeats.MaxBoots}
		err := adaptive.run(p, func() ([]evaluate.Sample, error) {
			samples, err := st.Samples(ev.ID)
			return primary(samples), err
		}, func(round int, need map[string]bool) error {
			pr.Printf("adaptive sampling: boot %d of at most %d for %s", round+1, adaptive.max, strings.Join(trueKeys(need), ", "))
			for _, rp := range p.runs(round, round+1) {
				if need[rp.Variant] {
					if err := boot(rp, fmt.Sprintf("%d (adaptive)", round+1)); err != nil {
						return err
					}
				}
			}
			return nil
		})
		if err != nil {
			return failEval(err)
		}
		out.Adaptive = adaptive.why
	}
	timings = append(timings,
		report.StageTiming{Stage: "boot", Duration: bootTime},
		report.StageTiming{Stage: "benchmark", Duration: benchTime})
	pr.Done()

	// Report.
	start = time.Now()
	samples, err := st.Samples(ev.ID)
	if err != nil {
		return failEval(err)
	}
	if len(out.Failed) > 0 && len(samples) == 0 {
		return failEval(fail.Infraf("every boot failed; first: %s", out.Failed[0]))
	}
	r, err := buildReport(p, o, ev.ID, tree, repo, patched, specs, byKey, envs, samples, adaptive)
	if err != nil {
		return failEval(err)
	}
	r.Notes = append(r.Notes, out.Failed...)
	r.Notes = append(r.Notes, seriesNotes...)
	if patched != "" {
		cov, err := seriesCoverage(repo, baseHash, patched, specs, byKey, len(p.Arches) > 1)
		if err != nil {
			r.Notes = append(r.Notes, "build coverage of the series unknown: "+err.Error())
		}
		r.Coverage = cov
		if w := r.CoverageWarning(); w != "" {
			pr.Printf("%s", w)
		}
	}
	for _, a := range p.Arches {
		if u := lands[a]; u != nil {
			for _, t := range sortedKeys(u.Versions) {
				r.Target.Tools = append(r.Target.Tools, t+" "+u.Versions[t]+" ("+u.Arch+")")
			}
		}
	}
	for _, v := range sortedKeys(envPerf(envs)) {
		r.Target.PerfEvents = v
	}
	r.Timings = append(timings, report.StageTiming{Stage: "report", Duration: time.Since(start)})
	out.Report = r
	out.Regressions = r.Regressions()
	if err := writeOutputs(r, o, out); err != nil {
		return failEval(err)
	}
	if err := st.SetEvaluationStatus(ev.ID, store.StatusDone); err != nil {
		return out, err
	}
	return out, nil
}

func buildReport(p *Pipeline, o RunOptions, evID int64, tree report.TreeInfo, repo, patched string,
	specs []BuildSpec, byKey map[string]*build.Artifact, envs map[string]evaluate.Environment, samples []evaluate.Sample,
	adaptive *adaptiveState) (*report.Report, error) {
	r := &report.Report{
		Title:       p.Name,
		ID:          fmt.Sprintf("%s-%d", p.Name, evID),
		Generated:   time.Now().UTC(),
		Tree:        tree,
		Arch:        strings.Join(p.Arches, ","),
		Interleaved: true,
		Notes:       append([]string(nil), p.Warnings...),
	}
	if !o.Now.IsZero() {
		r.Generated = o.Now
	}
	if o.Series != nil {
		r.Series = report.SeriesInfoFrom(o.Series, "https://lore.kernel.org/all/")
	}
	for _, b := range p.Benchmarks {
		if b.Name == "rcu" {
			r.PerRun = true
		}
	}
	specOf := map[string]BuildSpec{} // variant -> spec
	for _, s := range specs {
		for _, v := range s.Variants {
			specOf[v] = s
		}
	}
	for _, v := range p.Variants {
		s := specOf[v.Name]
		art := byKey[s.Key]
		rv := report.Variant{Name: v.Name, Description: v.Description, Patched: s.ApplySeries,
			Cmdline: strings.TrimSpace(p.Target.Cmdline + " " + v.Cmdline), Boots: 0}
		for _, sym := range sortedKeys(v.Symbols) {
			rv.Config = append(rv.Config, sym+"="+v.Symbols[sym])
		}
		if v.SchedPreempt != "" {
			rv.Runtime = append(rv.Runtime, "/sys/kernel/debug/sched/preempt="+v.SchedPreempt)
		}
		for _, k := range sortedKeys(v.Sysctls) {
			rv.Runtime = append(rv.Runtime, "sysctl "+k+"="+v.Sysctls[k])
		}
		if v.CPUs != "" {
			rv.Runtime = append(rv.Runtime, "taskset -c "+v.CPUs)
		}
		if art != nil {
			rv.Kernel = evaluate.Kernel{Variant: v.Name, Arch: s.Arch, Image: art.Image, Config: art.Config,
				ConfigHash: art.ConfigHash(), Commit: art.Meta.Git.Commit, Cmdline: rv.Cmdline}
			if !art.CacheHit {
				rv.BuildSeconds = art.Meta.Results.Duration["total"]
			}
		}
		if env, ok := envs[v.Name]; ok {
			rv.Env = env
			if r.Target.Kind == "" {
				r.Target = report.TargetFromEnv(env)
			}
		}
		for _, smp := range samples {
			if smp.Variant == v.Name && smp.Boot+1 > rv.Boots {
				rv.Boots = smp.Boot + 1
			}
		}
		r.Variants = append(r.Variants, rv)
	}
	if r.Target.Kind == "" {
		r.Target = report.TargetInfo{Kind: p.Target.Kind, Host: p.Target.Host, Deterministic: p.Deterministic}
	}
	r.Target.Deterministic = p.Deterministic

	// Confounds: every compared pair whose kernels differ.
	var pairs []report.Pair
	for _, c := range p.Comparisons {
		pairs = append(pairs, report.Pair{Base: c.Base, Other: c.Other})
		a, b := specOf[c.Base], specOf[c.Other]
		if a.Key == b.Key || byKey[a.Key] == nil || byKey[b.Key] == nil {
			continue
		}
		cf, err := confound(repo, c.Base, c.Other, a, b, byKey[a.Key], byKey[b.Key])
		if err != nil {
			return nil, err
		}
		r.Confounds = append(r.Confounds, cf)
	}
	var chains [][]string
	for _, ch := range p.Chains {
		chains = append(chains, ch.Variants)
	}
	opts := stats.Options{Threshold: threshold(p)}
	if adaptive != nil {
		// Every look was a chance to stop: the final verdicts are taken at
		// the per-look level so the overall false-positive rate stays 5%.
		opts.Alpha = adaptive.alpha()
		r.Notes = append(r.Notes, fmt.Sprintf("adaptive sampling: %d to %d boots per variant; verdicts at alpha %.3g (0.05 over %d looks)",
			adaptive.min, adaptive.max, opts.Alpha, adaptive.max-adaptive.min+1))
		for _, w := range adaptive.why {
			r.Notes = append(r.Notes, "adaptive sampling stopped: "+w)
		}
	}
	if err := r.AddResults(primary(samples), report.Spec{Comparisons: pairs, Chains: chains, Stats: opts}); err != nil {
		return nil, err
	}
	return r, nil
}

// primary drops ops/s samples of benchmarks that also report ns/op: one is
// the reciprocal of the other, so comparing both says everything twice.
// The store keeps both.
func primary(samples []evaluate.Sample) []evaluate.Sample {
	hasNs := map[string]bool{}
	for _, s := range samples {
		if s.Metric == "ns/op" {
			hasNs[s.Benchmark] = true
		}
	}
	out := samples[:0:0]
	for _, s := range samples {
		if s.Metric == "ops/s" && hasNs[s.Benchmark] {
			continue
		}
		out = append(out, s)
	}
	return out
}

// confound explains how two compared kernels' final configs differ.
func confound(repo, base, other string, a, b BuildSpec, artA, artB *build.Artifact) (report.Confound, error) {
	requested := map[string]string{}
	for k, v := range a.Symbols {
		if b.Symbols[k] != v {
			requested[k] = v
		}
	}
	for k, v := range b.Symbols {
		if a.Symbols[k] != v {
			requested[k] = v
		}
	}
	d, err := build.ConfigDiff(build.DiffInput{A: artA.Config, B: artB.Config, Requested: requested,
		Tree: repo, Commit: artB.Meta.Git.Commit, Arch: b.Arch})
	if err != nil {
		return report.Confound{}, fmt.Errorf("config differences %s vs %s: %w", base, other, err)
	}
	cf := report.Confound{Base: base, Other: other}
	for _, ch := range d.Changes {
		cf.Deltas = append(cf.Deltas, delta(ch))
	}
	return cf, nil
}

func delta(ch kconfig.SymbolChange) report.ConfigDelta {
	d := report.ConfigDelta{Symbol: ch.Symbol, From: ch.A, To: ch.B, Requested: ch.Requested,
		Highlight: !ch.Requested && watched[ch.Symbol], Via: ch.Via}
	if len(ch.Rules) > 0 {
		r := ch.Rules[0]
		d.Rule, d.Where = r.Text, r.Pos.String()
		if r.Owner != "" && r.Owner != ch.Symbol {
			d.Rule = fmt.Sprintf("%s: %s", r.Owner, r.Text)
		}
		if r.Note != "" {
			d.Rule += " (" + r.Note + ")"
		}
	}
	d.Mechanical = !ch.Requested && len(ch.Rules) == 0 && ch.Depth < 0
	return d
}

func writeOutputs(r *report.Report, o RunOptions, out *Outcome) error {
	write := func(name string, fn func(f *os.File) error) (string, error) {
		path := filepath.Join(o.OutDir, name)
		f, err := os.Create(path)
		if err != nil {
			return "", fail.Infra(err)
		}
		if err := fn(f); err != nil {
			f.Close()
			return "", err
		}
		return path, f.Close()
	}
	var err error
	if out.Text, err = write("report.txt", func(f *os.File) error { return report.WriteText(f, r) }); err != nil {
		return err
	}
	if out.JSON, err = write("report.json", func(f *os.File) error { return report.WriteJSON(f, r) }); err != nil {
		return err
	}
	if out.Markdown, err = write("report.md", func(f *os.File) error { return report.WriteMarkdown(f, r) }); err != nil {
		return err
	}
	if out.KCIDB, err = write("kcidb.json", func(f *os.File) error { return report.WriteKCIDB(f, r) }); err != nil {
		return err
	}
	answer := o.Answer
	if answer == nil && o.Series != nil {
		answer = firstMessage(o.Series)
	}
	if answer == nil {
		return nil
	}
	d, err := report.NewDraft(r, answer, report.DraftOptions{From: o.From, TestedBy: o.TestedBy, Now: o.Now})
	if err != nil {
		return err
	}
	out.Mail = d
	out.Draft, err = write("reply.eml", func(f *os.File) error { return report.WriteDraft(f, *d) })
	return err
}

// envPerf maps each distinct perf-events probe result to a variant.
func envPerf(envs map[string]evaluate.Environment) map[string]string {
	out := map[string]string{}
	for v, e := range envs {
		if e.PerfEvents != "" {
			out[e.PerfEvents] = v
		}
	}
	return out
}

func userlandVersions(u *userland.Userland) string {
	var parts []string
	for _, t := range sortedKeys(u.Versions) {
		parts = append(parts, t+" "+u.Versions[t])
	}
	return strings.Join(parts, ", ")
}

func newTarget(rp RunPlan, cacheDir string, u *userland.Userland) (evaluate.Target, error) {
	agents := ""
	if cacheDir != "" {
		agents = filepath.Join(cacheDir, "agents")
	}
	switch rp.Target.Kind {
	case "ssh":
		return ssh.New(ssh.Config{URL: rp.Target.Host, BootHook: rp.Target.BootHook, Timeout: rp.Target.Timeout, CacheDir: agents})
	default:
		cfg := qemu.Config{SMP: rp.Target.SMP, MemoryMB: rp.Target.MemoryMiB, Deterministic: rp.Deterministic,
			KVM: rp.Target.KVM, Timeout: rp.Target.Timeout, CacheDir: agents}
		if u != nil {
			cfg.Userland, cfg.UserlandLibPath = u.Archive, u.LibPath()
		}
		return qemu.New(cfg), nil
	}
}

func resolveCommit(repo, rev string) (string, error) {
	r, err := git.PlainOpenWithOptions(repo, &git.PlainOpenOptions{DetectDotGit: false})
	if err != nil {
		return "", fail.Inputf("kernel tree %s: not a git repository: %v", repo, err)
	}
	h, err := r.ResolveRevision(plumbing.Revision(rev))
	if err != nil {
		return "", fail.Inputf("kernel tree %s: base %q not found: %v", repo, rev, err)
	}
	return h.String(), nil
}

func firstMessage(s *series.Series) *mbox.Message {
	if s.Cover != nil {
		return s.Cover
	}
	if len(s.Patches) > 0 && s.Patches[0] != nil {
		return s.Patches[0].Msg
	}
	return nil
}

func sampleLine(samples []evaluate.Sample) string {
	var parts []string
	for _, s := range samples {
		if s.Metric == "ns/op" || s.Metric == "mean_ns" {
			parts = append(parts, fmt.Sprintf("%s %.0f %s", s.Benchmark, s.Value, s.Metric))
		}
	}
	if len(parts) == 0 {
		return fmt.Sprintf("%d sample(s)", len(samples))
	}
	return strings.Join(parts, ", ")
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
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

// effectiveBoots is the planned boots per variant: RunOptions.Boots when
// set, else repeats.boots.
func effectiveBoots(p *Pipeline, o RunOptions) int {
	if o.Boots > 0 {
		return o.Boots
	}
	return p.Repeats.Boots
}

// adaptiveState is adaptive sampling between min and max boots per variant.
type adaptiveState struct {
	min, max int
	// why says, per comparison and metric, why sampling stops or goes on
	// (the last look's words).
	why []string
}

// run looks at the samples (load) and boots the variants that need more
// (boot, with the round: the boot index), round after round, until no
// comparison needs more or every variant had max boots.
func (a *adaptiveState) run(p *Pipeline, load func() ([]evaluate.Sample, error), boot func(round int, need map[string]bool) error) error {
	for round := a.min; ; round++ {
		samples, err := load()
		if err != nil {
			return err
		}
		need := a.look(p, samples)
		if len(need) == 0 || round >= a.max {
			return nil
		}
		if err := boot(round, need); err != nil {
			return err
		}
	}
}

// alpha is the per-look significance level (Bonferroni over the looks).
func (a *adaptiveState) alpha() float64 {
	return stats.AdaptiveAlpha(stats.AdaptiveOptions{MinN: a.min, MaxN: a.max})
}

// look decides which variants need another boot: both variants of every
// comparison whose verdict is not clear for some benchmark metric.
func (a *adaptiveState) look(p *Pipeline, samples []evaluate.Sample) map[string]bool {
	type key struct{ bench, metric, variant string }
	values := map[key][]float64{}
	boots := map[key]map[int]bool{}
	higher := map[key]bool{}
	for _, s := range samples {
		k := key{s.Benchmark, s.Metric, s.Variant}
		values[k] = append(values[k], s.Value)
		if boots[k] == nil {
			boots[k] = map[int]bool{}
		}
		boots[k][s.Boot] = true
		higher[k] = higher[k] || s.HigherIsBetter
	}
	var keys []key
	for k := range values {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].bench != keys[j].bench {
			return keys[i].bench < keys[j].bench
		}
		return keys[i].metric < keys[j].metric
	})
	need := map[string]bool{}
	a.why = nil
	for _, c := range p.Comparisons {
		for _, bk := range keys {
			if bk.variant != c.Base {
				continue
			}
			ok := key{bk.bench, bk.metric, c.Other}
			if values[ok] == nil {
				continue
			}
			// Samples per boot: the step of every look.
			step := max(1, len(values[bk])/max(1, len(boots[bk])))
			h := higher[bk] || higher[ok]
			if !h {
				if dir, known := stats.HigherIsBetter(bk.metric); known {
					h = dir
				}
			}
			more, why := stats.NeedMore(values[bk], values[ok], stats.AdaptiveOptions{HigherIsBetter: h,
				MinN: a.min * step, MaxN: a.max * step, Step: step, Threshold: threshold(p)})
			a.why = append(a.why, fmt.Sprintf("%s %s %s -> %s: %s", bk.bench, bk.metric, c.Base, c.Other, why))
			if more {
				need[c.Base], need[c.Other] = true, true
			}
		}
	}
	return need
}

// threshold is T for the pipeline's verdicts and adaptive sampling
// ([compare] threshold; a Pipeline built by hand gets the defaults).
func threshold(p *Pipeline) float64 {
	switch {
	case p.Compare.Threshold > 0:
		return p.Compare.Threshold
	case p.Deterministic:
		return stats.DefaultDeterministicThreshold
	}
	return stats.DefaultThreshold
}

func trueKeys(m map[string]bool) []string {
	var k []string
	for x, ok := range m {
		if ok {
			k = append(k, x)
		}
	}
	sort.Strings(k)
	return k
}
