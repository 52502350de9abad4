package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/pipelines/experiments/repro"
	"github.com/patcheval/patcheval/pipelines/store"
)

func init() {
	register(&command{
		name:    "repro",
		summary: "write the reproducer of a stored evaluation (configs, series, pipeline, versions, QEMU lines, samples, repro.sh); compare two samples.csv",
		usage:   "patcheval repro [--db PATH] [--json] <evaluation-id> [DIR] | repro --compare [--tolerance PCT] A/samples.csv B/samples.csv",
		setup: func(fs *flag.FlagSet) func(ctx context.Context, env *Env, args []string) error {
			asJSON := fs.Bool("json", false, "print what was written (or the comparison) as JSON")
			db := new(string)
			dbFlag(fs, db, "database: a SQLite `path` (default <state dir>/"+store.FileName+"; PATCHEVAL_STATE_DIR moves the state dir), postgres://... or libpq key=value")
			compare := fs.Bool("compare", false, "compare two samples.csv files (a reproducer's and its rerun's): exit 1 when a mean differs by more than --tolerance")
			tol := fs.Float64("tolerance", 1, "with --compare: allowed difference of the means in `percent` (deterministic QEMU repeats within 1%)")
			return func(ctx context.Context, env *Env, args []string) error {
				if *compare {
					return reproCompare(env.Stdout, args, *tol, *asJSON)
				}
				return reproWrite(env.Stdout, *db, args, *asJSON)
			}
		},
	})
}

func reproWrite(w io.Writer, db string, args []string, asJSON bool) error {
	if len(args) < 1 || len(args) > 2 {
		return fail.Inputf("repro: want <evaluation-id> [DIR], got %d arguments", len(args))
	}
	id, err := strconv.ParseInt(args[0], 10, 64)
	if err != nil || id <= 0 {
		return fail.Inputf("repro: %q is not an evaluation id (a positive number; `patcheval runs` lists them)", args[0])
	}
	dir := fmt.Sprintf("patcheval-repro-%d", id)
	if len(args) == 2 {
		dir = args[1]
	}
	st, err := store.Open(db)
	if err != nil {
		return err
	}
	defer st.Close()
	r, err := repro.Build(st, id, repro.Options{})
	if err != nil {
		return err
	}
	if err := r.WriteDir(dir); err != nil {
		return err
	}
	if asJSON {
		var files []string
		for _, f := range r.Files {
			files = append(files, f.Name)
		}
		return json.NewEncoder(w).Encode(map[string]any{"evaluation_id": id, "dir": dir, "files": files, "missing": r.Missing})
	}
	fmt.Fprintf(w, "reproducer of evaluation %d: %s (%d files; rerun: %s/repro.sh)\n", id, dir, len(r.Files), dir)
	for _, m := range r.Missing {
		fmt.Fprintf(w, "missing: %s\n", m)
	}
	return nil
}

func reproCompare(w io.Writer, args []string, tol float64, asJSON bool) error {
	if len(args) != 2 {
		return fail.Inputf("repro --compare: want two samples.csv files, got %d arguments", len(args))
	}
	if tol < 0 {
		return fail.Inputf("repro --compare: --tolerance %v: want a percentage >= 0", tol)
	}
	var in [2]io.Reader
	for i, a := range args {
		f, err := os.Open(a)
		if err != nil {
			return fail.Input(err)
		}
		defer f.Close()
		in[i] = f
	}
	rows, ok, err := repro.Compare(in[0], in[1], tol)
	if err != nil {
		return err
	}
	if asJSON {
		if err := json.NewEncoder(w).Encode(map[string]any{"same": ok, "tolerance_pct": tol, "rows": rows}); err != nil {
			return err
		}
	} else {
		for _, r := range rows {
			fmt.Fprintln(w, r)
		}
	}
	if !ok {
		return fail.Failedf("repro --compare: the samples of %s and %s differ by more than %v%%", args[0], args[1], tol)
	}
	fmt.Fprintf(w, "same samples within %v%%\n", tol)
	return nil
}
