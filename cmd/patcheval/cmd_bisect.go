package main

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/patcheval/patcheval/evaluate/stats"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/progress"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/experiments/bisect"
	"github.com/patcheval/patcheval/pipelines/store"
)

func init() {
	register(&command{
		name:    "bisect",
		summary: "find the commit that caused a performance regression (build, boot and measure each step)",
		usage:   "patcheval bisect --tree PATH --good REF --bad REF --pipeline NAME [--arch A] [--variant V] [--benchmark B --metric M] [--threshold PCT]",
		setup: func(fs *flag.FlagSet) func(ctx context.Context, env *Env, args []string) error {
			tree := new(string)
			fs.Var(absPathValue{tree}, "tree", "kernel git `repository`")
			good := fs.String("good", "", "a good `revision` (tag, commit): a first-parent ancestor of --bad")
			bad := fs.String("bad", "", "the bad `revision`")
			pipeline := fs.String("pipeline", "", "pipeline `name` or TOML file whose kernel and benchmark are measured ("+pipelines.DefaultName+", "+strings.Join(pipelines.List(), ", ")+")")
			variant := fs.String("variant", "", "the pipeline's `variant` to build and boot (default: the first)")
			archFlag := fs.String("arch", "", "with --pipeline "+pipelines.DefaultName+": the `arch` to build (default x86_64)")
			benchmark := fs.String("benchmark", "", "`benchmark` to bisect (default: the pipeline's first)")
			metric := fs.String("metric", "ns/op", "`metric` of the benchmark")
			threshold := fs.Float64("threshold", 0, "smallest regression worth bisecting, in `percent` (default 1)")
			maxBoots := fs.Int("max-boots", 10, "boots per step at most when the pipeline is not deterministic")
			out := fs.String("out", "", "write report.{txt,md,json}, kcidb.json, culprit.eml and the steps' evaluations to `DIR` (default ./patcheval-bisect-<good>..<bad>)")
			from := fs.String("from", "", "sender of the reply draft \"Name <email>\" (default: git config)")
			db := new(string)
			dbFlag(fs, db, "database: a SQLite `path` (default <state dir>/"+store.FileName+"), postgres://... or libpq key=value")
			jobs := fs.Int("j", 0, "make -j budget (default: number of CPUs)")
			asJSON := fs.Bool("json", false, "print the result as JSON")
			return func(ctx context.Context, env *Env, args []string) error {
				if len(args) > 0 {
					return fail.Inputf("bisect: unexpected arguments %q (flags only)", args)
				}
				var missing []string
				for name, v := range map[string]string{"--tree": *tree, "--good": *good, "--bad": *bad, "--pipeline": *pipeline} {
					if v == "" {
						missing = append(missing, name)
					}
				}
				if len(missing) > 0 {
					return fail.Inputf("bisect: missing %s", strings.Join(sortedStrings(missing), ", "))
				}
				var arches []string
				if *archFlag != "" {
					arches = strings.Split(*archFlag, ",")
				}
				p, err := pipelines.Named(*pipeline, nil, arches)
				if err != nil {
					return err
				}
				b := *benchmark
				if b == "" {
					if len(p.Benchmarks) == 0 {
						return fail.Inputf("bisect: pipeline %s runs no benchmark", p.Name)
					}
					b = p.Benchmarks[0].Name
				}
				if _, err := bisect.Single(p, *variant, b); err != nil {
					return err
				}
				dir := *out
				if dir == "" {
					dir = "patcheval-bisect-" + safeName(*good) + ".." + safeName(*bad)
				}
				sender, err := draftSender(*from, *tree)
				if err != nil {
					return err
				}
				storePath := *db
				if storePath == "" {
					storePath = store.DefaultPath()
				}
				pr := progress.New(env.Stderr)
				m := &bisect.PipelineMeasurer{Pipeline: p, Variant: *variant, Benchmark: b, Metric: *metric, Repo: *tree,
					OutDir: filepath.Join(dir, "steps"), StorePath: storePath, Jobs: *jobs, Progress: pr}
				higher, _ := stats.HigherIsBetter(*metric)
				res, err := bisect.Run(ctx, bisect.Options{Repo: *tree, Good: *good, Bad: *bad, Measurer: m, Benchmark: b,
					Metric: *metric, HigherIsBetter: higher, Deterministic: p.Deterministic, Threshold: *threshold,
					MaxBoots: *maxBoots, Logf: func(format string, a ...any) { pr.Printf(format, a...) }})
				pr.Done()
				if err != nil {
					return err
				}
				variantName := *variant
				if variantName == "" {
					variantName = p.Variants[0].Name
				}
				c := bisect.Context{Tree: *tree, Pipeline: p.Name, Variant: variantName, Arch: strings.Join(p.Arches, ",")}
				files, err := bisect.WriteReports(dir, res, c, sender)
				if err != nil {
					return err
				}
				if *asJSON {
					return bisect.WriteJSON(env.Stdout, res, c)
				}
				if err := bisect.WriteText(env.Stdout, res, c); err != nil {
					return err
				}
				fmt.Fprintf(env.Stdout, "\nreports: %s\n", strings.Join(files, "\n         "))
				if res.Status != bisect.Found {
					return fail.Failedf("bisect: %d candidates remain (skipped commits)", len(res.Candidates))
				}
				return nil
			}
		},
	})
}

func safeName(s string) string {
	s = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, s)
	if len(s) > 40 {
		s = s[:40]
	}
	return s
}

func sortedStrings(xs []string) []string {
	out := append([]string(nil), xs...)
	sort.Strings(out)
	return out
}
