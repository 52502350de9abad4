package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/mail"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/patcheval/patcheval/evaluate/report"
	"github.com/patcheval/patcheval/internal/arch"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/gittree"
	"github.com/patcheval/patcheval/internal/progress"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/mbox/numbers"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/experiments/bisect"
	"github.com/patcheval/patcheval/pipelines/experiments/perpatch"
	"github.com/patcheval/patcheval/pipelines/experiments/repro"
	"github.com/patcheval/patcheval/pipelines/runner"
	"github.com/patcheval/patcheval/pipelines/store"
)

// pipelineFlags are `patcheval lore --pipeline ...`: evaluate the resolved
// series end to end.
type pipelineFlags struct {
	pipeline         string
	out              string
	boots            int
	jobs             int
	db               string
	from             string
	testedBy         bool
	failOnRegression bool
	send             bool
	verbose          bool
	evaluate         bool
	cover            bool
	arch             string
	perPatch         bool
	noSeriesBisect   bool
	threadNumbers    stringList
	keepGoing        bool
	revertIfMerged   bool
}

func (pf *pipelineFlags) add(fs *flag.FlagSet) {
	fs.StringVar(&pf.pipeline, "pipeline", "", "evaluate the series with this pipeline: "+pipelines.DefaultName+" (base vs patched on the arches the series touches), a shipped name ("+strings.Join(pipelines.List(), ", ")+") or a TOML `file`; needs --tree")
	fs.BoolVar(&pf.evaluate, "evaluate", false, "evaluate the series with the default pipeline (--pipeline "+pipelines.DefaultName+")")
	fs.StringVar(&pf.arch, "arch", "", "with --pipeline "+pipelines.DefaultName+": comma-separated `arches` to measure on (default: those the series touches under arch/, else x86_64)")
	fs.BoolVar(&pf.cover, "cover", false, "with --pipeline: also enable the Kconfig symbols that would build the series' C files (a fragment), so that the kernels compile what the series changes")
	fs.StringVar(&pf.out, "out", "", "with --pipeline: write reports and the reply draft to `DIR` (default ./patcheval-<pipeline>-<slug>)")
	fs.IntVar(&pf.boots, "boots", 0, "with --pipeline: boots per variant (default: the pipeline's repeats.boots)")
	fs.IntVar(&pf.jobs, "j", 0, "with --pipeline: make -j budget shared by all kernel builds (default: number of CPUs)")
	dbFlag(fs, &pf.db, "with --pipeline: the state database, a SQLite `file` (default $PATCHEVAL_STATE_DIR/patcheval.db), postgres://... or libpq key=value")
	fs.StringVar(&pf.from, "from", "", "with --pipeline: reply draft sender \"Name <email>\" (default: git config user.name/user.email)")
	fs.BoolVar(&pf.testedBy, "tested-by", false, "with --pipeline: add Tested-by: to the reply draft when nothing regressed")
	fs.BoolVar(&pf.send, "send", false, "with --pipeline: mail the reply draft after a confirmation on the terminal (SMTP settings in $PATCHEVAL_CONFIG_DIR/config.toml)")
	fs.BoolVar(&pf.failOnRegression, "fail-on-regression", false, "with --pipeline: exit 1 when a comparison finds a regression of at least the pipeline's threshold")
	fs.BoolVar(&pf.perPatch, "per-patch", false, "with --pipeline: also measure after each patch of the series (every prefix of the applied commits, with the kernels of the variants that have the series) and report which patch moves each metric")
	fs.Var(&pf.threadNumbers, "thread-numbers", "with --pipeline: also set beside the results the numbers reported in this related thread (an mbox `file`, e.g. the upstream thread of a backport), like for like as the series' own thread's (repeatable)")
	fs.BoolVar(&pf.noSeriesBisect, "no-series-bisect", false, "with --pipeline: when the whole series regresses, do not bisect inside the series to name the patch")
	fs.BoolVar(&pf.keepGoing, "keep-going", false, "with --pipeline: drop the variants whose kernels cannot be configured on this tree (the report says which and why) and evaluate the others; without it such a variant stops the evaluation before anything compiles")
	fs.BoolVar(&pf.revertIfMerged, "revert-if-merged", false, "with --pipeline: when the base already has the whole series, measure the base with the series reverted (the variants without it) against the base as it is (those with it), and say so in the report and the draft; without it such a series is refused (exit 2)")
	fs.BoolVar(&pf.verbose, "verbose", false, "with --pipeline: list every config difference in the printed report (mechanical consequences such as INLINE_* and *_BUILD, toolchain values) instead of counting them")
}

// wanted is the pipeline asked for ("" for none): --evaluate is
// --pipeline default.
func (pf *pipelineFlags) wanted() string {
	if pf.evaluate && pf.pipeline == "" {
		return pipelines.DefaultName
	}
	return pf.pipeline
}

// options are the runner's options for the resolved series: the apply
// flags (--tree, --base, --branch, --fuzz, --3way) and the pipeline's.
func (pf *pipelineFlags) options(p *pipelines.Pipeline, lr *loreResult, af applyFlags, from mbox.Address) runner.Options {
	out := pf.out
	if out == "" {
		out = fmt.Sprintf("patcheval-%s-%s", p.Name, lr.Series.Slug())
	}
	return runner.Options{
		Mbox:           runner.ThreadMbox(lr.Thread),
		Version:        lr.Series.Version,
		AnySender:      lr.AnySender,
		ThreadSource:   lr.Thread.Source,
		AM:             lr.AM,
		Tree:           af.tree,
		Base:           af.base,
		Branch:         af.branch,
		Fuzz:           af.fuzz,
		ThreeWay:       af.threeWay,
		Boots:          pf.boots,
		From:           from,
		TestedBy:       pf.testedBy,
		Lore:           lr.Lore,
		Fetch:          lr.FetchTime,
		OutDir:         out,
		Cover:          pf.cover,
		KeepGoing:      pf.keepGoing,
		RevertIfMerged: pf.revertIfMerged,
	}
}

func (pf *pipelineFlags) run(ctx context.Context, env *Env, lr *loreResult, af applyFlags) error {
	var p *pipelines.Pipeline
	var err error
	var arches []string
	if pf.arch != "" {
		arches = strings.Split(pf.arch, ",")
	}
	if p, err = pipelines.Named(pf.wanted(), lr.Series, arches); err != nil {
		return err
	}
	for _, w := range p.Warnings {
		fmt.Fprintf(env.Stderr, "warning: %s\n", w)
	}
	if pf.perPatch {
		// Before anything is built: the per-patch run needs a comparison
		// the series decides.
		if _, err := perpatch.AtCommit(p, perpatch.SeriesPairs(p)); err != nil {
			return fail.Inputf("--per-patch: %v", err)
		}
	}
	if af.tree == "" && p.Tree.Path == "" {
		return fail.Inputf("--pipeline %s needs --tree PATH: the kernel git repository (scripts/linux-tree.sh imports Debian's 6.1 tree)", p.Name)
	}
	from, err := draftSender(pf.from, af.tree)
	if err != nil {
		return err
	}
	opts := pf.options(p, lr, af, from)
	if opts.ThreadNumbers, err = readThreadNumbers(pf.threadNumbers); err != nil {
		return err
	}
	// The series as Submit resolves it from the thread it stores (not
	// lr.Series: that one was resolved from the thread as fetched, whose
	// messages name other sources and whose notes the stored thread does
	// not have), resolved once here: Check and Submit take it. When it
	// fails, Check says why as it did.
	if r, err := runner.Resolve(ctx, opts); err == nil {
		opts.Resolved = r
	}
	if err := runner.Check(p, opts); err != nil {
		return err // before the state database is created
	}
	st, err := store.Open(pf.db)
	if err != nil {
		return err
	}
	defer st.Close()
	pr := progress.New(env.Stderr)
	renv := runner.Env{Store: st, Jobs: pf.jobs, Progress: pr}
	res, err := runner.RunWith(ctx, renv, p, opts, runner.FollowUps{
		PerPatch:     pf.perPatch,
		SeriesBisect: !pf.noSeriesBisect,
		Run: func(ctx context.Context, _ runner.Step, res *runner.Outcome) (runner.Found, error) {
			// The per-patch step bisects with the samples it measured, in
			// the same pass: nothing is left for a bisection step.
			return runner.Found{}, pf.takeApart(ctx, renv, res, opts)
		},
	})
	var reproDir string
	if err == nil {
		reproDir = writeRepro(env.Stderr, st, res.EvaluationID, filepath.Join(opts.OutDir, "repro"))
	}
	pr.Done()
	if err != nil {
		if res != nil {
			fmt.Fprintf(env.Stderr, "evaluation %d stopped; finished boots are kept (patcheval runs show %d); re-run to resume\n", res.EvaluationID, res.EvaluationID)
		}
		return err
	}
	if lr.JSON {
		if lr.Extra == nil {
			lr.Extra = map[string]any{}
		}
		lr.Extra["evaluation"] = res
		if reproDir != "" {
			lr.Extra["reproducer"] = reproDir
		}
	}
	if err := pf.deliver(ctx, env, res, reproDir, lr.JSON); err != nil {
		return err
	}
	if pf.failOnRegression && len(res.Regressions) > 0 {
		return fail.Failedf("%d regression(s): %s", len(res.Regressions), strings.Join(res.Regressions, "; "))
	}
	return nil
}

// takeApart is the follow-ups of the stage graph after the report
// (runner.StagePerPatch, runner.StageSeriesBisect), in one pass: it
// measures the series patch by patch (--per-patch) and bisects a
// whole-series regression inside the series (unless --no-series-bisect),
// then writes the reports and the draft again with the results. Every
// measurement is a stored evaluation: an interrupted run resumes.
func (pf *pipelineFlags) takeApart(ctx context.Context, renv runner.Env, res *runner.Outcome, o runner.Options) error {
	if !pf.perPatch && pf.noSeriesBisect {
		return nil
	}
	s, err := perpatch.Load(renv.Store, res.EvaluationID)
	if err != nil {
		return err
	}
	pairs := perpatch.SeriesPairs(s.Pipeline)
	if len(pairs) == 0 && !pf.perPatch {
		return nil
	}
	at, err := perpatch.AtCommit(s.Pipeline, pairs)
	if err != nil {
		return fail.Inputf("--per-patch: %v", err)
	}
	pr := renv.Progress
	pp, err := perpatch.Run(ctx, s, perpatch.Options{
		PerPatch: pf.perPatch,
		Measurer: &perpatch.RunnerMeasurer{Env: renv, Pipeline: at, Repo: s.Repo, Boots: s.Boots, OutDir: filepath.Join(o.OutDir, "per-patch")},
		Bisect:   !pf.noSeriesBisect,
		BisectMeasurer: func(at *pipelines.Pipeline, variant, benchmark, metric string) bisect.Measurer {
			return &bisect.PipelineMeasurer{Pipeline: at, Variant: variant, Benchmark: benchmark, Metric: metric, Repo: s.Repo,
				OutDir: filepath.Join(o.OutDir, "series-bisect", "steps"), StorePath: pf.db, Jobs: pf.jobs, Progress: pr}
		},
		BisectDir: filepath.Join(o.OutDir, "series-bisect"),
		Context:   bisect.Context{Tree: s.Repo, Arch: strings.Join(s.Pipeline.Arches, ",")},
		Logf:      func(format string, a ...any) { pr.Printf(format, a...) },
	})
	if err != nil || pp == nil {
		return err
	}
	res.Report.PerPatch = pp
	return runner.Rewrite(renv, res.EvaluationID, res.Report, o.OutDir, res)
}

func printOutcome(w io.Writer, res *runner.Outcome, o report.TextOptions) {
	fmt.Fprintln(w)
	_ = report.WriteTextWith(w, res.Report, o)
	fmt.Fprintln(w)
	for _, v := range report.Verdicts(res.Report) {
		fmt.Fprintln(w, v)
	}
	fmt.Fprintf(w, "\nevaluation %d%s\n", res.EvaluationID, map[bool]string{true: " (resumed)"}[res.Resumed])
	fmt.Fprintf(w, "report:      %s\n             %s\n             %s\nkcidb:       %s\n", res.Text, res.Markdown, res.JSON, res.KCIDB)
}

// deliver prints the outcome (unless asJSON), mails the reply draft when
// --send asks (after the confirmation) and then says where the draft is
// and whether it was sent.
func (pf *pipelineFlags) deliver(ctx context.Context, env *Env, res *runner.Outcome, reproDir string, asJSON bool) error {
	if !asJSON {
		// The report quotes the series' title and its authors' words.
		_ = runsText(env.Stdout, func(w io.Writer) error {
			printOutcome(w, res, report.TextOptions{Verbose: pf.verbose})
			return nil
		})
		if reproDir != "" {
			fmt.Fprintf(env.Stdout, "reproducer:  %s (rerun: sh %s)\n", reproDir, filepath.Join(reproDir, "repro.sh"))
		}
	}
	sent := false
	var err error
	if pf.send {
		if res.Mail == nil {
			err = fail.Inputf("--send: there is no reply draft (no message to answer)")
		} else {
			sent, err = sendDraft(ctx, env, res.Mail)
		}
	}
	if !asJSON && res.Draft != "" {
		state := "not sent"
		if sent {
			state = "sent as <" + res.Mail.MessageID + ">"
		}
		fmt.Fprintf(env.Stdout, "reply draft: %s (%s)\n", res.Draft, state)
	}
	return err
}

// writeRepro writes evaluation id's reproducer (pipelines/experiments/repro) as dir,
// replacing an earlier run's, and returns dir; "" with a warning on w
// when it cannot (the evaluation stands without it: `patcheval repro`
// writes it again).
func writeRepro(w io.Writer, st *store.Store, id int64, dir string) string {
	r, err := repro.Build(st, id, repro.Options{})
	if err == nil {
		err = r.Replace(dir)
	}
	if err != nil {
		fmt.Fprintf(w, "warning: evaluation %d: the reproducer was not written to %s: %v (patcheval repro %d writes it)\n", id, dir, err, id)
		return ""
	}
	for _, m := range r.Missing {
		fmt.Fprintf(w, "warning: reproducer %s: missing %s\n", dir, m)
	}
	return dir
}

// draftSender is --from, else PATCHEVAL_FROM, else git config
// user.name/user.email (of the tree, then global).
func draftSender(flagValue, tree string) (mbox.Address, error) {
	v := flagValue
	if v == "" {
		v = os.Getenv("PATCHEVAL_FROM")
	}
	if v != "" {
		a, err := mail.ParseAddress(v)
		if err != nil {
			return mbox.Address{}, fail.Inputf("--from %q: %v (want \"Name <email>\")", v, err)
		}
		return mbox.Address{Name: a.Name, Email: a.Address}, nil
	}
	git := func(key string) string {
		args := []string{"config", "--get", key}
		if tree != "" {
			args = append([]string{"--git-dir", tree}, args...)
			if fi, err := os.Stat(filepath.Join(tree, ".git")); err == nil && fi.IsDir() {
				args[1] = filepath.Join(tree, ".git")
			}
		}
		out, err := exec.Command("git", args...).Output()
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(out))
	}
	name, email := git("user.name"), git("user.email")
	if email == "" {
		host, _ := os.Hostname()
		user := os.Getenv("USER")
		if user == "" {
			user = "patcheval"
		}
		email = user + "@" + host
	}
	return mbox.Address{Name: name, Email: email}, nil
}

// readThreadNumbers reads the numbers reported in each mbox file
// (--thread-numbers): a file that cannot be read or holds no message is
// bad input, named.
func readThreadNumbers(files []string) ([]numbers.Number, error) {
	var out []numbers.Number
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, fail.Inputf("--thread-numbers %s: %v", f, err)
		}
		msgs, err := mbox.ParseBytes(data, f)
		if err != nil || len(msgs) == 0 {
			return nil, fail.Inputf("--thread-numbers %s: not an mbox with messages (%v)", f, err)
		}
		out = append(out, numbers.Read(mbox.NewThread(msgs, f))...)
	}
	return out, nil
}

// precheck refuses, before the thread is fetched, what the run would
// refuse after it: an unknown pipeline or arch, --arch without default,
// a pipeline without a tree, a tree that is not a git repository.
func (pf *pipelineFlags) precheck(af applyFlags) error {
	name, tree := pf.wanted(), af.tree
	switch _, isDefault := pipelines.SplitDefault(name); {
	case name == "":
		if pf.arch != "" {
			return fail.Inputf("--arch goes with --pipeline %s", pipelines.DefaultName)
		}
	case isDefault:
		for _, a := range strings.Split(pf.arch, ",") {
			if _, err := arch.Normalize(a); a != "" && err != nil {
				return fail.Inputf("--arch: %v", err)
			}
		}
	default:
		if pf.arch != "" {
			return fail.Inputf("--arch goes with --pipeline %s; pipeline %s names its own arches", pipelines.DefaultName, name)
		}
		p, err := pipelines.Find(name)
		if err != nil {
			return err
		}
		if pf.perPatch {
			if _, err := perpatch.AtCommit(p, perpatch.SeriesPairs(p)); err != nil {
				return fail.Inputf("--per-patch: %v", err)
			}
		}
		if tree == "" {
			tree = p.Tree.Path
		}
	}
	if _, err := readThreadNumbers(pf.threadNumbers); err != nil {
		return err
	}
	if name != "" && tree == "" {
		return fail.Inputf("--pipeline %s needs --tree PATH: the kernel git repository (patcheval tree import makes one)", name)
	}
	if tree == "" {
		return nil
	}
	_, st, _, err := gittree.Open(tree, 1)
	if err != nil {
		return fail.Inputf("--tree %s: %v", tree, err)
	}
	st.Close()
	return nil
}
