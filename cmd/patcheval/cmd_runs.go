package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/termsafe"
	"github.com/patcheval/patcheval/pipelines/store"
)

func init() {
	register(&command{
		name:    "runs",
		summary: "list stored evaluations; show one (builds, runs, samples) or a run's console log",
		usage:   "patcheval runs [--json] [--db PATH|URL] | runs show <evaluation-id> [--json] | runs console <run-id>",
		setup: func(fs *flag.FlagSet) func(ctx context.Context, env *Env, args []string) error {
			asJSON := fs.Bool("json", false, "print JSON instead of a table")
			db := new(string)
			dbFlag(fs, db, "database: a SQLite `path` (default <state dir>/"+store.FileName+"; PATCHEVAL_STATE_DIR moves the state dir), the service's postgres:// URL or libpq key=value")
			return func(ctx context.Context, env *Env, args []string) error {
				return runsCommand(env.Stdout, *db, *asJSON, args)
			}
		},
	})
}

func runsCommand(w io.Writer, db string, asJSON bool, args []string) error {
	sub := ""
	if len(args) > 0 {
		sub, args = args[0], args[1:]
	}
	parseID := func(what string) (int64, error) {
		if len(args) != 1 {
			return 0, fail.Inputf("runs %s: want exactly one %s id, got %d arguments", sub, what, len(args))
		}
		id, err := strconv.ParseInt(args[0], 10, 64)
		if err != nil || id <= 0 {
			return 0, fail.Inputf("runs %s: %q is not a %s id (a positive number)", sub, args[0], what)
		}
		return id, nil
	}
	var id int64
	var err error
	switch sub {
	case "", "list":
		if len(args) != 0 {
			return fail.Inputf("runs: unexpected arguments %q (did you mean 'runs show <id>'?)", args)
		}
	case "show":
		id, err = parseID("evaluation")
	case "console":
		id, err = parseID("run")
	default:
		return fail.Inputf("runs: unknown subcommand %q (want show or console)", sub)
	}
	if err != nil {
		return err
	}
	st, err := store.Open(db)
	if err != nil {
		return err
	}
	defer st.Close()
	switch sub {
	case "show":
		if asJSON {
			return runsShow(w, st, id, true)
		}
		return runsText(w, func(w io.Writer) error { return runsShow(w, st, id, false) })
	case "console":
		c, err := st.Console(id)
		if err != nil {
			return err
		}
		if termsafe.Terminal(w) {
			// The stored log as it came from the serial console, for
			// pipes and files; a terminal gets it escaped (a guest's
			// ESC sequences would drive it), CRLF as plain line ends.
			_, err = io.WriteString(w, termsafe.Text(strings.ReplaceAll(string(c), "\r\n", "\n")))
			return err
		}
		_, err = w.Write(c)
		return err
	}
	if asJSON {
		return runsList(w, st, true)
	}
	return runsText(w, func(w io.Writer) error { return runsList(w, st, false) })
}

// runsText runs print into a buffer and writes it with its control
// characters escaped: series titles, message ids, trees and error texts
// come from mail and builds, and must not drive the terminal.
func runsText(w io.Writer, print func(io.Writer) error) error {
	var buf bytes.Buffer
	err := print(&buf)
	if _, werr := io.WriteString(w, termsafe.Text(buf.String())); err == nil {
		err = werr
	}
	return err
}

func runsList(w io.Writer, st *store.Store, asJSON bool) error {
	evs, err := st.ListEvaluations()
	if err != nil {
		return err
	}
	if asJSON {
		if evs == nil {
			evs = []*store.Evaluation{}
		}
		return runsWriteJSON(w, evs)
	}
	if len(evs) == 0 {
		fmt.Fprintf(w, "no evaluations in %s\n", st.Where())
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tCREATED\tSTATUS\tPIPELINE\tSERIES\tBUILDS\tRUNS\tSAMPLES")
	for _, e := range evs {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%d/%d\t%d\n", e.ID, e.Created.Local().Format("2006-01-02 15:04"),
			e.Status, e.Pipeline, runsSeriesLabel(e), e.Builds, e.FinishedRuns, e.Runs, e.Samples)
	}
	return tw.Flush()
}

func runsSeriesLabel(e *store.Evaluation) string {
	t := e.SeriesTitle
	if t == "" {
		t = e.SeriesMsgID
	}
	if t == "" {
		return "-"
	}
	if e.SeriesVersion > 1 {
		t = fmt.Sprintf("v%d %s", e.SeriesVersion, t)
	}
	if r := []rune(t); len(r) > 60 {
		t = string(r[:57]) + "..."
	}
	return t
}

type runsShowJSON struct {
	Evaluation *store.Evaluation `json:"evaluation"`
	Builds     []store.Build     `json:"builds"`
	Runs       []store.Run       `json:"runs"`
	// SampleCounts: variant -> benchmark/metric -> samples.
	SampleCounts map[string]map[string]int `json:"sample_counts"`
}

func runsShow(w io.Writer, st *store.Store, id int64, asJSON bool) error {
	e, err := st.Evaluation(id)
	if err != nil {
		return err
	}
	builds, err := st.BuildsOf(id)
	if err != nil {
		return err
	}
	runs, err := st.RunsOf(id)
	if err != nil {
		return err
	}
	samples, err := st.Samples(id)
	if err != nil {
		return err
	}
	counts := map[string]map[string]int{}
	for _, s := range samples {
		if counts[s.Variant] == nil {
			counts[s.Variant] = map[string]int{}
		}
		counts[s.Variant][s.Benchmark+" "+s.Metric]++
	}
	if asJSON {
		if builds == nil {
			builds = []store.Build{}
		}
		if runs == nil {
			runs = []store.Run{}
		}
		return runsWriteJSON(w, runsShowJSON{Evaluation: e, Builds: builds, Runs: runs, SampleCounts: counts})
	}
	fmt.Fprintf(w, "evaluation %d  %s  (%s)\n", e.ID, e.Status, e.Pipeline)
	fmt.Fprintf(w, "  key:     %s\n", e.Key)
	if e.SeriesMsgID != "" || e.SeriesTitle != "" {
		fmt.Fprintf(w, "  series:  %s <%s>\n", runsSeriesLabel(e), strings.Trim(e.SeriesMsgID, "<>"))
	}
	fmt.Fprintf(w, "  tree:    %s  base %s\n", runsOrDash(e.Tree), runsOrDash(e.Base))
	fmt.Fprintf(w, "  created: %s  updated %s\n", e.Created.Local().Format(time.DateTime), e.Updated.Local().Format(time.DateTime))

	fmt.Fprintf(w, "\nbuilds (%d)\n", len(builds))
	if len(builds) > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  VARIANT\tARCH\tSTATUS\tCOMMIT\tCONFIG\tARTIFACTS")
		for _, b := range builds {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", b.Variant, b.Arch, b.Status, runsShort(b.Commit, 12), runsShort(b.ConfigHash, 12), runsOrDash(b.ArtifactDir))
		}
		tw.Flush()
		for _, b := range builds {
			if b.ErrorText != "" {
				fmt.Fprintf(w, "  build %s/%s: %s: %s\n", b.Variant, b.Arch, b.ErrorKind, runsFirstLine(b.ErrorText))
			}
		}
	}

	fmt.Fprintf(w, "\nruns (%d)\n", len(runs))
	if len(runs) > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  RUN\tVARIANT\tBOOT\tSTATUS\tSAMPLES\tKERNEL\tTARGET\tDURATION")
		for _, r := range runs {
			target := runsOrDash(r.Env.Target)
			if r.Env.Deterministic {
				target += " (deterministic)"
			}
			dur := "-"
			if !r.Finished.IsZero() {
				dur = r.Finished.Sub(r.Started).Round(100 * time.Millisecond).String()
			}
			fmt.Fprintf(tw, "  %d\t%s\t%d\t%s\t%d\t%s\t%s\t%s\n", r.ID, r.Variant, r.Boot, r.Status, r.Samples, runsOrDash(r.Env.KernelRelease), target, dur)
		}
		tw.Flush()
		for _, r := range runs {
			if r.ErrorText != "" {
				fmt.Fprintf(w, "  run %d (%s#%d): %s: %s (patcheval runs console %d)\n", r.ID, r.Variant, r.Boot, r.ErrorKind, runsFirstLine(r.ErrorText), r.ID)
			}
		}
	}

	fmt.Fprintf(w, "\nsamples of finished runs (%d)\n", len(samples))
	variants := make([]string, 0, len(counts))
	for v := range counts {
		variants = append(variants, v)
	}
	sort.Strings(variants)
	for _, v := range variants {
		keys := make([]string, 0, len(counts[v]))
		for k := range counts[v] {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = fmt.Sprintf("%s: %d", k, counts[v][k])
		}
		fmt.Fprintf(w, "  %s: %s\n", v, strings.Join(parts, ", "))
	}
	return nil
}

func runsWriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func runsOrDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func runsShort(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return runsOrDash(s)
}

func runsFirstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}
