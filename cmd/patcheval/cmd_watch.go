package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/progress"
	"github.com/patcheval/patcheval/internal/xdg"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/experiments/watch"
	"github.com/patcheval/patcheval/pipelines/service"
	"github.com/patcheval/patcheval/pipelines/store"
)

type watchFlags struct {
	name, remote, branch, tags, pipeline, series, schedule, tree string
	bisect, regzbot                                              bool
	db, out, from, svg, arch                                     string
	jobs                                                         int
	asJSON                                                       bool
}

func init() {
	register(&command{
		name:    "watch",
		summary: "re-test a remote's new tags on a schedule, keep the history, bisect regressions",
		usage: "patcheval watch add --remote URL [--branch B] [--tags GLOB] --pipeline NAME [--arch A] [--series MSGID] [--schedule SPEC] [--bisect] [--regzbot] [--tree PATH] [--name N]\n" +
			"       patcheval watch list | show NAME [--svg FILE] | rm NAME | run-now NAME | daemon   [--json] [--db PATH]",
		setup: func(fs *flag.FlagSet) func(ctx context.Context, env *Env, args []string) error {
			var f watchFlags
			fs.StringVar(&f.name, "name", "", "add: the watch's `name` (default: from the remote and the tag pattern)")
			fs.StringVar(&f.remote, "remote", "", "add: the git remote `URL` to list tags from (https://, git://, file://)")
			fs.StringVar(&f.branch, "branch", "", "add: also re-test this `branch`'s head whenever it moves (history entries branch@commit, after the tags); with --branch, --tags is optional")
			fs.StringVar(&f.tags, "tags", "", "add: tag `glob`, e.g. 'v6.*-rc*' (ordered by version: rc10 after rc9)")
			fs.StringVar(&f.pipeline, "pipeline", "", "add: pipeline `name` or TOML file evaluated on every new tag ("+pipelines.DefaultName+" with --series, "+strings.Join(pipelines.List(), ", ")+")")
			fs.StringVar(&f.arch, "arch", "", "add: with --pipeline "+pipelines.DefaultName+": comma-separated `arches` (default: those the series touches)")
			fs.StringVar(&f.series, "series", "", "add: re-apply this series (`Message-ID`) on every new tag")
			fs.StringVar(&f.schedule, "schedule", "", "add: cron `spec` (5 fields, or @every 30m, @hourly; default "+watch.DefaultSchedule+")")
			fs.BoolVar(&f.bisect, "bisect", false, "add: bisect every regression between consecutive tags")
			fs.BoolVar(&f.regzbot, "regzbot", false, "add: put regzbot's commands (#regzbot introduced:, title:; fix: or resolve: once a later tag shows it gone) in the regression drafts, for lists regzbot tracks")
			fs.StringVar(&f.tree, "tree", "", "add: local git `repository` new tags are fetched into and built from (default: the pipeline's tree.path)")
			dbFlag(fs, &f.db, "database: a SQLite `path` (default <state dir>/"+store.FileName+"), postgres://... or libpq key=value")
			fs.StringVar(&f.out, "out", "", "run-now, daemon: reports go to `DIR`/<watch>/<tag> (default <state dir>/watches)")
			fs.StringVar(&f.from, "from", "", "run-now, daemon: sender of bisection reply drafts \"Name <email>\"")
			fs.StringVar(&f.svg, "svg", "", "show: also write the history plot (values with 95% CI bands per tag) to `FILE`")
			fs.IntVar(&f.jobs, "j", 0, "run-now, daemon: make -j budget (default: number of CPUs)")
			fs.BoolVar(&f.asJSON, "json", false, "print JSON")
			return func(ctx context.Context, env *Env, args []string) error { return f.run(ctx, env, fs, args) }
		},
	})
}

// setupWatches runs the watches as queue work on the service's database
// (the one watch add writes): the scheduler queues ticks, the watch
// queue's jobs re-test and bisect step by step.
func setupWatches(cfg *service.Config, o serveOptions) (func(*service.Service), error) {
	return func(s *service.Service) {
		if err := syncConfig(o.Log, s.Store()); err != nil {
			fmt.Fprintf(o.Log, "watches: %v\n", err)
		}
		// serve --lore reaches every re-test and bisection.
		ev, b := pipelineWatch(o.Log, s.Store(), filepath.Join(s.StateDir(), "watches"), cfg.CacheDir, cfg.Jobs, cfg.From, cfg.Lore)
		s.Watch(service.WatchConfig{Eval: ev, Bisection: b, Deterministic: watch.Deterministic})
	}, nil
}

func (f *watchFlags) run(ctx context.Context, env *Env, fs *flag.FlagSet, args []string) error {
	if len(args) == 0 {
		return fail.Inputf("watch: want a subcommand: add, list, show, rm, run-now or daemon")
	}
	sub, args := args[0], args[1:]
	addOnly := map[string]bool{"name": true, "remote": true, "branch": true, "tags": true, "pipeline": true, "series": true,
		"schedule": true, "arch": true, "bisect": true, "tree": true, "regzbot": true}
	var bad []string
	fs.Visit(func(fl *flag.Flag) {
		if addOnly[fl.Name] && sub != "add" {
			bad = append(bad, "--"+fl.Name)
		}
	})
	if len(bad) > 0 {
		return fail.Inputf("watch %s: %s only go with 'watch add'", sub, strings.Join(bad, ", "))
	}
	wantArgs := func(n int, what string) error {
		if len(args) != n {
			return fail.Inputf("watch %s: want %s, got %q", sub, what, args)
		}
		return nil
	}
	st, err := store.Open(f.db)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := syncConfig(env.Stderr, st); err != nil {
		return err
	}
	switch sub {
	case "add":
		if err := wantArgs(0, "no arguments (flags only)"); err != nil {
			return err
		}
		return f.add(env, st)
	case "list", "ls":
		if err := wantArgs(0, "no arguments"); err != nil {
			return err
		}
		return watchList(env.Stdout, st, f.asJSON)
	case "show":
		if err := wantArgs(1, "one watch name"); err != nil {
			return err
		}
		return f.show(env.Stdout, st, args[0])
	case "rm", "remove":
		if err := wantArgs(1, "one watch name"); err != nil {
			return err
		}
		w, err := st.FindWatch(args[0])
		if err != nil {
			return err
		}
		if err := st.RemoveWatch(w.ID); err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "removed watch %s (its evaluations stay: patcheval runs)\n", w.Name)
		if w.Origin == "config" {
			fmt.Fprintf(env.Stderr, "note: %s comes from config.toml: it comes back unless removed there\n", w.Name)
		}
		return nil
	case "run-now":
		if err := wantArgs(1, "one watch name"); err != nil {
			return err
		}
		if _, err := st.FindWatch(args[0]); err != nil {
			return err
		}
		cfg, watches, err := f.jobsConfig(env)
		if err != nil {
			return err
		}
		st.Close()
		res, err := service.RunWatchNow(ctx, cfg, watches, args[0])
		if res != nil {
			if f.asJSON {
				enc := json.NewEncoder(env.Stdout)
				enc.SetIndent("", "  ")
				enc.Encode(res)
			} else {
				how := "in this process"
				if res.Served {
					how = "by the serve working the database"
				}
				fmt.Fprintf(env.Stdout, "watch %s: tick job %d, run %s; new: %s; evaluated: %s\n", res.Watch, res.TickJob, how,
					orNone(res.New), orNone(res.Evaluated))
				for _, e := range res.Events {
					fmt.Fprintf(env.Stdout, "event: %s %s..%s %s %s %s %+.1f%% [%+.1f%%, %+.1f%%]\n", e.Verdict, e.From, e.To,
						e.Variant, e.Benchmark, e.Metric, e.Change, e.CILow, e.CIHigh)
				}
				for _, fl := range res.Failed {
					fmt.Fprintf(env.Stdout, "failed: %s\n", fl)
				}
			}
		}
		return err
	case "daemon":
		if err := wantArgs(0, "no arguments"); err != nil {
			return err
		}
		cfg, watches, err := f.jobsConfig(env)
		if err != nil {
			return err
		}
		ws, _ := st.Watches()
		st.Close()
		fmt.Fprintf(env.Stderr, "patcheval watch daemon: %d watch(es); Ctrl-C stops\n", len(ws))
		return service.RunWatchDaemon(ctx, cfg, watches)
	}
	return fail.Inputf("watch: unknown subcommand %q (add, list, show, rm, run-now, daemon)", sub)
}

// syncConfig brings the [[watch]] tables of config.toml into the store.
func syncConfig(log io.Writer, st *store.Store) error {
	path := filepath.Join(xdg.ConfigDir(), "config.toml")
	ws, err := watch.LoadConfig(path, pipelineOK)
	if err != nil {
		return err
	}
	added, updated, err := watch.Sync(st, ws)
	for _, n := range added {
		fmt.Fprintf(log, "watch %s: added from %s\n", n, path)
	}
	for _, n := range updated {
		fmt.Fprintf(log, "watch %s: updated from %s\n", n, path)
	}
	return err
}

func pipelineOK(name string) error {
	_, err := pipelines.Named(name, nil, nil)
	return err
}

func (f *watchFlags) add(env *Env, st *store.Store) error {
	w := store.Watch{Name: f.name, Remote: f.remote, Branch: f.branch, Tags: f.tags, Pipeline: f.pipeline, SeriesID: f.series,
		Schedule: f.schedule, Bisect: f.bisect, Tree: f.tree, Regzbot: f.regzbot}
	if w.Name == "" {
		w.Name = watch.DefaultName(w.Remote, w.Tags+w.Branch)
	}
	if f.arch != "" {
		if _, ok := pipelines.SplitDefault(w.Pipeline); !ok {
			return fail.Inputf("--arch goes with --pipeline %s; pipeline %s names its own arches", pipelines.DefaultName, w.Pipeline)
		}
		w.Pipeline = pipelines.DefaultSpec(strings.Split(f.arch, ","))
	}
	w.Pipeline = absPipeline(w.Pipeline)
	if w.Tree == "" {
		if p, err := pipelines.Named(w.Pipeline, nil, nil); err == nil {
			w.Tree = p.Tree.Path
		}
	}
	if w.Tree != "" {
		if abs, err := filepath.Abs(w.Tree); err == nil {
			w.Tree = abs
		}
	}
	if err := watch.Validate(&w, pipelineOK); err != nil {
		return err
	}
	if p, _ := pipelines.Named(w.Pipeline, nil, nil); p != nil && p.NeedsSeries() && w.SeriesID == "" {
		return fail.Inputf("watch %s: pipeline %s applies a series on each tag: give --series MSGID", w.Name, p.Name)
	}
	got, err := st.AddWatch(w)
	if err != nil {
		return err
	}
	if f.asJSON {
		return json.NewEncoder(env.Stdout).Encode(got)
	}
	what := "tags " + got.Tags
	switch {
	case got.Branch != "" && got.Tags != "":
		what += " and branch " + got.Branch + "'s head"
	case got.Branch != "":
		what = "branch " + got.Branch + "'s head"
	}
	fmt.Fprintf(env.Stdout, "added watch %s: %s %s, pipeline %s, schedule %s%s\n", got.Name, got.Remote, what, got.Pipeline,
		got.Schedule, map[bool]string{true: ", bisecting regressions"}[got.Bisect])
	fmt.Fprintf(env.Stdout, "run it now with 'patcheval watch run-now %s'; 'patcheval watch daemon' (or serve) runs it on schedule\n", got.Name)
	return nil
}

// jobsConfig is the service configuration and watch setup of `watch
// run-now` and `watch daemon`: the same jobs as serve's on the database
// serve uses (--db), reports under --out (default <state dir>/watches),
// bisection drafts signed by --from, builds within -j.
func (f *watchFlags) jobsConfig(env *Env) (service.Config, func(*service.Service) service.WatchConfig, error) {
	sender, err := draftSender(f.from, "")
	if err != nil {
		return service.Config{}, nil, err
	}
	cfg := service.Config{Database: f.db, Jobs: f.jobs, From: sender, Log: env.Stderr}
	return cfg, func(s *service.Service) service.WatchConfig {
		out := f.out
		if out == "" {
			out = filepath.Join(s.StateDir(), "watches")
		}
		ev, b := pipelineWatch(env.Stderr, s.Store(), out, "", f.jobs, sender, "")
		return service.WatchConfig{Eval: ev, Bisection: b, Deterministic: watch.Deterministic}
	}, nil
}

// pipelineWatch is the evaluator and bisection of real watches: the
// runner on st's database, reports under out.
// lore is the public-inbox a watch's series is fetched from ("": $PATCHEVAL_LORE,
// else the default); serve passes its --lore.
func pipelineWatch(log io.Writer, st *store.Store, out, cacheDir string, jobs int, from mbox.Address, lore string) (*watch.PipelineEvaluator, *watch.Bisection) {
	ev := &watch.PipelineEvaluator{OutDir: filepath.Clean(out), StorePath: st.Path(), CacheDir: cacheDir, Jobs: jobs, Progress: progress.New(log), Lore: lore}
	logf := func(format string, a ...any) {
		fmt.Fprintf(log, "%s %s\n", time.Now().UTC().Format("15:04:05"), fmt.Sprintf(format, a...))
	}
	return ev, &watch.Bisection{Eval: ev, From: from, Logf: logf}
}

func watchList(w io.Writer, st *store.Store, asJSON bool) error {
	ws, err := st.Watches()
	if err != nil {
		return err
	}
	if asJSON {
		if ws == nil {
			ws = []*store.Watch{}
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(ws)
	}
	if len(ws) == 0 {
		fmt.Fprintln(w, "no watches (patcheval watch add --remote URL --tags GLOB --pipeline NAME)")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tREMOTE\tTAGS\tPIPELINE\tSCHEDULE\tBISECT\tLAST CHECK\tSTATE")
	for _, x := range ws {
		state := "ok"
		if x.LastCheck.IsZero() {
			state = "never checked"
		}
		if x.LastError != "" {
			state = x.LastErrorKind + " error: " + firstLineOf(x.LastError)
		}
		last := "-"
		if !x.LastCheck.IsZero() {
			last = x.LastCheck.UTC().Format("2006-01-02 15:04")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%v\t%s\t%s\n", x.Name, x.Remote, x.Tags, x.Pipeline, x.Schedule, x.Bisect, last, state)
	}
	return tw.Flush()
}

func (f *watchFlags) show(w io.Writer, st *store.Store, name string) error {
	x, err := st.FindWatch(name)
	if err != nil {
		return err
	}
	h, err := watch.Load(st, x)
	if err != nil {
		return err
	}
	if f.svg != "" {
		file, err := os.Create(f.svg)
		if err != nil {
			return fail.Inputf("--svg %s: %v", f.svg, err)
		}
		if err := watch.WriteSVG(file, h); err != nil {
			file.Close()
			return err
		}
		if err := file.Close(); err != nil {
			return fail.Infra(err)
		}
	}
	if f.asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(h)
	}
	return watch.WriteText(w, h)
}

func orNone(xs []string) string {
	if len(xs) == 0 {
		return "none"
	}
	return strings.Join(xs, " ")
}

func firstLineOf(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// absPipeline stores a pipeline file by its absolute path (a watch runs
// from serve's directory, not the one it was added from); names stay.
func absPipeline(name string) string {
	if _, ok := pipelines.SplitDefault(name); ok {
		return name
	}
	if _, err := pipelines.Builtin(name); err == nil {
		return name
	}
	if st, err := os.Stat(name); err == nil && !st.IsDir() {
		if abs, err := filepath.Abs(name); err == nil {
			return abs
		}
	}
	return name
}
