package runner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/patcheval/patcheval/build"
	"github.com/patcheval/patcheval/build/kconfig"
	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/evaluate/guest"
	"github.com/patcheval/patcheval/evaluate/report"
	"github.com/patcheval/patcheval/evaluate/stats"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/gittree"
	"github.com/patcheval/patcheval/internal/linuxtree"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/mbox/numbers"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/store"
	"github.com/patcheval/patcheval/series"
	"github.com/patcheval/patcheval/series/recipients"
)

// Report compares evaluation id's samples and writes report.txt,
// report.json, report.md, kcidb.json, reply.eml (the draft, never sent)
// and reply.json (the same draft as JSON) into outDir, then marks the
// evaluation done. It reads everything from the store: the kernels, every
// finished boot (also those of other processes) and the stage timings.
func Report(ctx context.Context, env Env, id int64, outDir string) (out *Outcome, err error) {
	defer failed(ctx, env, id, &err)
	if outDir == "" {
		return nil, fail.Inputf("evaluation %d: no output directory for the report", id)
	}
	if err := ctx.Err(); err != nil {
		// Interrupted before the report: an interrupted run writes none
		// (re-running the command writes it from the store).
		return nil, fail.Infra(err)
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return nil, fail.Infra(err)
	}
	start := time.Now()
	ev, err := load(env, id)
	if err != nil {
		return nil, err
	}
	tree, err := treeInfo(env, ev)
	if err != nil {
		return nil, err
	}
	byKey, err := artifacts(env, ev)
	if err != nil {
		return nil, err
	}
	samples, err := env.Store.Samples(id)
	if err != nil {
		return nil, err
	}
	envs, failures, err := bootsOf(env, id)
	if err != nil {
		return nil, err
	}
	out = &Outcome{EvaluationID: id, Failed: failures}
	if len(failures) > 0 && len(samples) == 0 {
		return out, fail.Infraf("every boot failed; first: %s", failures[0])
	}
	var adaptive *adaptiveState
	if planned := plannedBoots(ev); ev.p.Repeats.MaxBoots > planned {
		adaptive = &adaptiveState{min: planned, max: ev.p.Repeats.MaxBoots}
		adaptive.next(ev.p, stats.Primary(samples))
		out.Adaptive = adaptive.why
	}
	r, err := buildReport(ev, tree, byKey, envs, samples, adaptive)
	if err != nil {
		return out, err
	}
	r.Notes = append(r.Notes, out.Failed...)
	r.Notes = append(r.Notes, ev.in.Notes...)
	switch {
	case ev.p.Compare.Layout:
		r.Notes = append(r.Notes, LayoutChecked)
	case !ev.p.Deterministic:
		r.Notes = append(r.Notes, LayoutNotChecked)
	}
	if a, _ := appliedOf(env, id); a != nil && a.Head != "" {
		cov, err := seriesCoverage(ev.in.Tree, ev.in.BaseHash, a.Head, ev.p.Builds(), byKey, len(ev.p.Arches) > 1)
		if err != nil {
			r.Notes = append(r.Notes, "build coverage of the series unknown: "+err.Error())
		}
		r.Coverage = cov
		if w := r.CoverageWarning(); w != "" {
			env.progress().Printf("%s", w)
		}
	}
	if err := targetTools(ctx, env, ev, r, envs); err != nil {
		return out, err
	}
	if r.Timings, err = timings(env, ev, byKey, time.Since(start)); err != nil {
		return out, err
	}
	out.Report = r
	out.Regressions = r.Regressions()
	if err := writeOutputs(r, ev, outDir, out); err != nil {
		return out, err
	}
	return out, env.Store.Tx(ctx, func(tx *store.Tx) error {
		if err := env.Store.SetEvaluationStatusTx(tx, id, store.StatusDone); err != nil {
			return err
		}
		return record(ctx, env, tx)
	})
}

// treeInfo is the report's tree: the base and the applied commits.
func treeInfo(env Env, ev *evaluation) (report.TreeInfo, error) {
	tree := report.TreeInfo{Path: ev.in.Tree, Base: ev.in.BaseHash, BaseName: ev.in.baseName(),
		BaseRule: ev.in.BaseRule, BaseWhy: ev.in.BaseWhy}
	if c, err := gittree.Resolve(ev.in.Tree, ev.in.BaseHash); err == nil {
		tree.Name = linuxtree.Name(c.Message, c.Committer.Email)
	}
	a, err := appliedOf(env, ev.id)
	if err != nil {
		return tree, err
	}
	for _, c := range a.Commits {
		tree.Commits = append(tree.Commits, report.Commit{Hash: c.Hash, Subject: c.Subject})
	}
	return tree, nil
}

// bootsOf reads evaluation id's runs: the environment of each variant's
// last good boot, and the boots that failed and were not redone.
func bootsOf(env Env, id int64) (map[string]evaluate.Environment, []string, error) {
	runs, err := env.Store.RunsOf(id)
	if err != nil {
		return nil, nil, err
	}
	envs := map[string]evaluate.Environment{}
	ok := map[evaluate.BootKey]bool{}
	for _, r := range runs {
		if r.Status == store.RunOK {
			envs[r.Variant] = r.Env
			ok[evaluate.BootKey{Variant: r.Variant, Boot: r.Boot}] = true
		}
	}
	var failures []string
	for _, r := range runs {
		k := evaluate.BootKey{Variant: r.Variant, Boot: r.Boot}
		if (r.Status == store.RunFailed || r.Status == store.RunInfra) && !ok[k] && !strings.HasPrefix(r.ErrorText, "superseded: ") {
			failures = append(failures, fmt.Sprintf("%s boot %d: %s", r.Variant, r.Boot+1, r.ErrorText))
			ok[k] = true // once per boot
		}
	}
	return envs, failures, nil
}

// targetTools names the users' tools in the guests and the perf events
// their kernels count.
func targetTools(ctx context.Context, env Env, ev *evaluation, r *report.Report, envs map[string]evaluate.Environment) error {
	for _, a := range ev.p.Arches {
		u, _, err := userlandFor(ctx, env, ev.p, a)
		if err != nil {
			return err
		}
		if u != nil {
			for _, t := range sortedKeys(u.Versions) {
				r.Target.Tools = append(r.Target.Tools, t+" "+u.Versions[t]+" ("+u.Arch+")")
			}
		}
	}
	r.Target.PerfEvents = perfEventsText(envs)
	return nil
}

// perfEventsText says which perf events the guests' kernels counted, as
// their agents probed them: the one result when every variant agrees,
// else each result after the variants that gave it (the arches, or
// variants with other kernel configs, differ).
func perfEventsText(envs map[string]evaluate.Environment) string {
	by := map[string][]string{}
	for v, e := range envs {
		if e.PerfEvents != "" {
			by[e.PerfEvents] = append(by[e.PerfEvents], v)
		}
	}
	var keys []string
	for k := range by {
		keys = append(keys, k)
	}
	if len(keys) == 1 {
		return keys[0]
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		vs := by[k]
		sort.Strings(vs)
		parts = append(parts, strings.Join(vs, ", ")+": "+k)
	}
	return strings.Join(parts, "; ")
}

// timings are the stage timings over every process that worked on the
// evaluation, in stage order, with this report's own.
func timings(env Env, ev *evaluation, byKey map[string]*build.Artifact, reportTime time.Duration) ([]report.StageTiming, error) {
	stored, err := env.Store.Timings(ev.id)
	if err != nil {
		return nil, err
	}
	var out []report.StageTiming
	if t, ok := stored["fetch"]; ok {
		out = append(out, report.StageTiming{Stage: "fetch", Duration: t.Duration})
	}
	if t, ok := stored["apply"]; ok {
		out = append(out, report.StageTiming{Stage: "apply", Duration: t.Duration, Note: t.Note})
	}
	cached := 0
	for _, a := range byKey {
		if a.CacheHit {
			cached++
		}
	}
	bt := stored["build"]
	note := fmt.Sprintf("%d kernel(s), %d cached", len(byKey), cached)
	if bt.Busy.Round(time.Second) > bt.Duration.Round(time.Second) {
		note += fmt.Sprintf("; %s added up over the kernels' builds, which overlapped", bt.Busy.Round(time.Second))
	}
	out = append(out, report.StageTiming{Stage: "build", Duration: bt.Duration, Note: note})
	if tools := ev.p.Tools(); len(tools) > 0 && ev.p.Target.Kind != "ssh" {
		out = append(out, report.StageTiming{Stage: "userland", Duration: stored["userland"].Duration, Note: strings.Join(tools, ", ")})
	}
	out = append(out,
		report.StageTiming{Stage: "boot", Duration: stored["boot"].Duration},
		report.StageTiming{Stage: "benchmark", Duration: stored["benchmark"].Duration},
		report.StageTiming{Stage: "report", Duration: reportTime})
	return out, nil
}

func writeOutputs(r *report.Report, ev *evaluation, outDir string, out *Outcome) error {
	write := func(name string, fn func(f *os.File) error) (string, error) {
		path := filepath.Join(outDir, name)
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
	if ev.series == nil {
		return nil
	}
	answer := ev.series.First()
	if answer == nil {
		return nil
	}
	o := report.DraftOptions{From: ev.in.From, TestedBy: ev.in.TestedBy, Now: ev.in.Now,
		Reproducer: fmt.Sprintf("`patcheval repro %d` writes the kernels' .configs, the series, the pipeline, versions, QEMU command lines, the samples and repro.sh", ev.id)}
	if ev.in.Recipients != nil {
		a, err := addressing(ev, len(r.Regressions()) > 0)
		if err != nil {
			return err
		}
		out.Addressing = a
		if len(a.To) == 0 {
			return nil // nobody takes this result: no draft
		}
		o.To, o.Cc = a.To, a.Cc
	}
	d, err := report.NewDraft(r, answer, o)
	if err != nil {
		return err
	}
	out.Mail = d
	if out.Draft, err = write("reply.eml", func(f *os.File) error { return report.WriteDraft(f, *d) }); err != nil {
		return err
	}
	// The same draft as data, for the mail reporter of `patcheval serve`.
	_, err = write("reply.json", func(f *os.File) error { return json.NewEncoder(f).Encode(d) })
	return err
}

// addressing is a bot's addressing of ev's reply (Options.Recipients):
// the series' author, its list and the maintainers of its patches in the
// base commit's MAINTAINERS.
func addressing(ev *evaluation, regressed bool) (*recipients.Addressing, error) {
	var patches [][]byte
	for _, p := range ev.series.Patches {
		if p != nil && p.Msg != nil {
			patches = append(patches, p.Msg.Raw)
		}
	}
	maint, err := recipients.ForSeries(ev.in.Tree, ev.in.BaseHash, patches)
	if err != nil {
		return nil, fmt.Errorf("reply addressing: %w", err)
	}
	author := ev.series.Author
	if m := ev.series.First(); author.Email == "" && m != nil {
		author = m.From
	}
	a := recipients.Resolve(*ev.in.Recipients, author, maint, regressed)
	return &a, nil
}

// watched are derived symbols the confound report always lists first:
// they change how the kernel behaves under benchmarks although nobody asked
// for them (the seed thread's PREEMPT_RCU).
var watched = map[string]bool{
	"PREEMPT_RCU": true, "PREEMPTION": true, "PREEMPT_BUILD": true, "PREEMPT_COUNT": true,
	"PREEMPT_DYNAMIC": true, "TASKS_RCU": true, "DEBUG_PREEMPT": true, "RCU_EXPERT": true,
	"NO_HZ_FULL": true, "HZ": true, "SECURITY_SELINUX": true,
}

// LayoutNotChecked is the note of every report measured in real time:
// a change between two kernels there may be code layout alone (function
// alignment moving hot code across cache lines, what 0-day kept
// reporting); patcheval does not rebuild the kernels with
// DEBUG_FORCE_FUNCTION_ALIGN_64B to tell, yet.
const LayoutNotChecked = "code layout not checked: on a target measured in real time a change can be function alignment alone; [compare] layout = true rebuilds both kernels with CONFIG_DEBUG_FORCE_FUNCTION_ALIGN_64B=y and says whether it survives"

// LayoutChecked is the note of a report with layout control ([compare]
// layout): each change that matters says layout-stable or -sensitive.
const LayoutChecked = "code layout checked: every compared kernel was also rebuilt with CONFIG_DEBUG_FORCE_FUNCTION_ALIGN_64B=y (variants " + pipelines.AlignSuffix + ") and compared the same way; each change that matters says whether it survives (layout-stable) or not (layout-sensitive)"

func buildReport(ev *evaluation, tree report.TreeInfo, byKey map[string]*build.Artifact,
	envs map[string]evaluate.Environment, samples []evaluate.Sample, adaptive *adaptiveState) (*report.Report, error) {
	p, o, repo, evID, specs := ev.p, ev.in, ev.in.Tree, ev.id, ev.p.Builds()
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
	r.Merged = o.Merged
	if ev.series != nil {
		// o.Lore may be a list (a follower's) or an all index: the
		// links go to its base's list or all index, never ".../all/all/".
		r.Series = seriesInfo(ev.series, mbox.LoreLink(o.Lore))
		// The numbers the thread reports go beside ours: read with the
		// series when it was resolved, else from the thread.
		if ev.haveThread {
			r.Thread = ev.thread
		} else if msgs, err := mbox.ParseBytes(o.Mbox, o.ThreadSource); err == nil {
			r.Thread = numbers.Read(mbox.NewThread(msgs, o.ThreadSource))
		}
	}
	r.Thread = append(r.Thread, o.ThreadNumbers...)
	for _, b := range p.Benchmarks {
		if b.Name == "rcu" {
			r.PerRun = true
		}
	}
	specOf := map[string]pipelines.BuildSpec{} // variant -> spec
	for _, s := range specs {
		for _, v := range s.Variants {
			specOf[v] = s
		}
	}
	for _, v := range p.Variants {
		s := specOf[v.Name]
		rv := reportVariant(p, o, v, s, byKey[s.Key])
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
	layout := map[report.Pair]report.Pair{}
	for _, c := range p.Comparisons {
		pairs = append(pairs, report.Pair{Base: c.Base, Other: c.Other})
		if p.Compare.Layout && !c.Aligned {
			layout[report.Pair{Base: c.Base, Other: c.Other}] = report.Pair{Base: c.Base + pipelines.AlignSuffix, Other: c.Other + pipelines.AlignSuffix}
		}
	}
	cfs, notes, err := confounds(p, repo, specOf, byKey)
	if err != nil {
		return nil, err
	}
	r.Confounds, r.Notes = append(r.Confounds, cfs...), append(r.Notes, notes...)
	var chains [][]string
	for _, ch := range p.Chains {
		chains = append(chains, ch.Variants)
	}
	opts := stats.Options{Threshold: p.Threshold()}
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
	if err := r.AddResults(stats.Primary(samples), report.Spec{Comparisons: pairs, Chains: chains, Stats: opts, Layout: layout}); err != nil {
		return nil, err
	}
	addTables(r, p)
	return r, nil
}

// reportVariant is variant v as the report describes it: its config and
// runtime settings, and its kernel (art, nil when it was not built).
func reportVariant(p *pipelines.Pipeline, o inputs, v pipelines.Variant, s pipelines.BuildSpec, art *build.Artifact) report.Variant {
	rv := report.Variant{Name: v.Name, Description: v.Description, Patched: s.ApplySeries,
		Cmdline: strings.TrimSpace(p.Target.Cmdline + " " + v.Cmdline), Boots: 0}
	for _, sym := range sortedKeys(v.Symbols) {
		rv.Config = append(rv.Config, sym+"="+v.Symbols[sym])
	}
	if t, ok := o.Trees[v.Kernel]; ok {
		rv.Ref, rv.Tree, rv.Onto, rv.Head = t.Ref, t.Describe(o.baseName()), t.Onto, t.Head
		for _, r := range t.Reverted {
			rv.Reverted = append(rv.Reverted, r.Label)
			rv.Reverts = append(rv.Reverts, report.RevertCommit{Label: r.Label, Original: r.Original, Commit: r.Hash})
		}
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
	if v.SELinux != "" {
		s := "SELinux " + v.SELinux
		if v.SELinux != guest.SELinuxDisabled && p.SELinuxPolicy != nil {
			s += " (policy " + p.SELinuxPolicy.Label() + " loaded through selinuxfs)"
		}
		rv.Runtime = append(rv.Runtime, s)
	}
	if art != nil {
		rv.Kernel = evaluate.Kernel{Variant: v.Name, Arch: s.Arch, Image: art.Image, Config: art.Config,
			ConfigHash: art.ConfigHash(), Commit: art.Meta.Git.Commit, Cmdline: rv.Cmdline, BuildID: art.BuildID()}
		if !art.CacheHit {
			rv.BuildSeconds = art.Meta.Results.Duration["total"]
		}
	}
	return rv
}

// addTables adds the pipeline's tables to r: one per arch with several
// arches (the samples' variants are then "name/arch").
func addTables(r *report.Report, p *pipelines.Pipeline) {
	for _, t := range p.Tables {
		suffixes := []string{""}
		if len(p.Arches) > 1 {
			suffixes = nil
			for _, a := range p.Arches {
				suffixes = append(suffixes, "/"+a)
			}
		}
		for _, sfx := range suffixes {
			var ch *report.Pair
			name, title := "", t.Name
			if sfx != "" {
				title += " (" + sfx[1:] + ")"
			}
			if t.Change != nil {
				ch, name = &report.Pair{Base: t.Change.Base + sfx, Other: t.Change.Other + sfx}, t.Change.Name
			}
			var cols []string
			for _, c := range t.Columns {
				cols = append(cols, c+sfx)
			}
			r.AddTable(title, cols, t.Benchmarks, name, ch)
		}
	}
}

// confounds are the confound reports of p's comparisons whose kernels
// differ (specOf: variant -> its build; byKey: build key -> its
// artifact), and a note per comparison across two releases: the code
// between them is not attributable to one patch.
func confounds(p *pipelines.Pipeline, repo string, specOf map[string]pipelines.BuildSpec, byKey map[string]*build.Artifact) ([]report.Confound, []string, error) {
	var cfs []report.Confound
	var notes []string
	for _, c := range p.Comparisons {
		a, b := specOf[c.Base], specOf[c.Other]
		if a.Key == b.Key || byKey[a.Key] == nil || byKey[b.Key] == nil {
			continue
		}
		cf, err := confound(repo, c.Base, c.Other, a, b, byKey[a.Key], byKey[b.Key])
		if err != nil {
			return nil, nil, err
		}
		cfs = append(cfs, cf)
		if a.Ref != b.Ref {
			notes = append(notes, fmt.Sprintf("%s -> %s compares two releases (%s vs %s): the code changed between them is not attributable to one patch, and no build coverage of a series applies to it; only the Kconfig differences above are decomposed",
				c.Base, c.Other, refLabel(a.Ref), refLabel(b.Ref)))
		}
	}
	return cfs, notes, nil
}

// confound explains how two compared kernels' final configs differ.
// Across two releases (the variants' refs differ) both trees' Kconfig
// are read: what the user requested, what Kconfig derived on the same
// rules, and what changed because the release changed a rule (both
// releases' lines with file:line) are told apart.
func confound(repo, base, other string, a, b pipelines.BuildSpec, artA, artB *build.Artifact) (report.Confound, error) {
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
	in := build.DiffInput{A: artA.Config, B: artB.Config, Requested: requested,
		Tree: repo, Commit: artB.Meta.Git.Commit, Arch: b.Arch}
	cross := a.Ref != b.Ref && artA.Meta.Git.Commit != artB.Meta.Git.Commit
	if cross {
		in.CommitA = artA.Meta.Git.Commit
	}
	d, err := build.ConfigDiff(in)
	if err != nil {
		return report.Confound{}, fmt.Errorf("config differences %s vs %s: %w", base, other, err)
	}
	cf := report.Confound{Base: base, Other: other}
	var byRelease map[string][]string // symbol -> its lines only one release has
	if cross {
		byRelease = releaseRules(d.Changes, refLabel(a.Ref), refLabel(b.Ref))
	}
	cf.Deltas = classify(d.Changes, byRelease)
	return cf, nil
}

// classify makes the report's deltas of changes; byRelease (nil on one
// tree) marks the changes a release's rules made.
func classify(changes []kconfig.SymbolChange, byRelease map[string][]string) []report.ConfigDelta {
	var out []report.ConfigDelta
	for _, ch := range changes {
		dl := delta(ch)
		if rules, ok := byRelease[ch.Symbol]; ok && !ch.Requested {
			dl.Release, dl.ReleaseRules = true, rules
		} else if len(ch.Via) > 0 && !ch.Requested {
			if rules, ok := byRelease[ch.Via[0]]; ok {
				dl.Release = true
				dl.ReleaseRules = append([]string{fmt.Sprintf("%s %s (via %s, whose rule the release changed)", dl.Where, dl.Rule, strings.Join(ch.Via, " > "))}, rules...)
			}
		}
		out = append(out, dl)
	}
	return out
}

// releaseRules are, per changed symbol, the Kconfig lines that only one
// of the two releases has ("v7.2.13 kernel/Kconfig.preempt:40: depends
// on !ARCH_HAS_PREEMPT_LAZY (line added)").
func releaseRules(changes []kconfig.SymbolChange, relA, relB string) map[string][]string {
	out := map[string][]string{}
	for _, ch := range changes {
		for _, r := range ch.Rules {
			rel, how := relB, "line added"
			switch r.Changed {
			case "":
				continue
			case "removed":
				rel, how = relA, "line removed"
			}
			text := r.Text
			if r.Owner != "" && r.Owner != ch.Symbol {
				text = r.Owner + ": " + text
			}
			out[ch.Symbol] = append(out[ch.Symbol], fmt.Sprintf("%s %s: %s (%s)", rel, r.Pos.String(), text, how))
		}
	}
	return out
}

func delta(ch kconfig.SymbolChange) report.ConfigDelta {
	d := report.ConfigDelta{Symbol: ch.Symbol, From: ch.A, To: ch.B, Requested: ch.Requested,
		Highlight: !ch.Requested && watched[ch.Symbol], Via: ch.Via}
	if len(ch.Rules) > 0 {
		// The first rule with a place: a symbol only release A defines
		// has B's "not defined in this tree" first, which has none.
		r := ch.Rules[0]
		for _, x := range ch.Rules {
			if x.Pos.File != "" {
				r = x
				break
			}
		}
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

func refLabel(ref string) string {
	if ref == "" {
		return "the base"
	}
	return ref
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// seriesInfo is what the report says about the series: its identity (the
// message that stands for it, Series.First), and Link into linkBase (the
// lore base the thread came from, ending in "/all/"; "" gives no link).
func seriesInfo(s *series.Series, linkBase string) report.SeriesInfo {
	if s == nil {
		return report.SeriesInfo{}
	}
	si := report.SeriesInfo{Title: s.Title, Version: s.Version, Author: s.Author, Patches: len(s.Patches)}
	if first := s.First(); first != nil {
		// PublicID: a message without Message-ID has no lore link.
		si.Subject, si.MessageID = first.Subject, first.PublicID()
		if linkBase != "" && si.MessageID != "" {
			si.Link = linkBase + si.MessageID + "/"
		}
	}
	for _, p := range s.Patches {
		if p == nil {
			continue
		}
		sum := sha256.Sum256([]byte(p.Diff))
		si.PatchHashes = append(si.PatchHashes, hex.EncodeToString(sum[:]))
	}
	return si
}

// Rewrite writes evaluation id's outputs again (reports, KCIDB, the reply
// draft) from r, a report the Report stage made and a later step amended
// (pipelines/experiments/perpatch adds the per-patch results), into outDir, and
// updates out's files and draft.
func Rewrite(env Env, id int64, r *report.Report, outDir string, out *Outcome) error {
	ev, err := load(env, id)
	if err != nil {
		return err
	}
	out.Report = r
	return writeOutputs(r, ev, outDir, out)
}
