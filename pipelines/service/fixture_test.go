package service

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/rivertype"

	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/evaluate/report"
	"github.com/patcheval/patcheval/pipelines/store"
)

// recordEvaluations stores n finished evaluations the way the stages do
// (store rows for the applied series, builds, runs with consoles and
// samples, stage timings; the completed River jobs of each stage;
// report.json and reply.eml in the service's output directory): the
// dashboard's data without booting kernels. Values are made up but shaped like the
// ppc-preempt-dynamic pipeline's (kill and getppid ns/op, three variants,
// voluntary+dyn slower on kill).
func recordEvaluations(tb testing.TB, s *Service, n, boots int) []int64 {
	tb.Helper()
	st := s.Store()
	variants := []string{"voluntary", "voluntary+dyn", "full"}
	var ids []int64
	for i := 0; i < n; i++ {
		e, _, err := st.CreateOrResumeEvaluation(store.Key("fixture", fmt.Sprint(i)), store.EvaluationMeta{
			Pipeline: "ppc-preempt-dynamic", SeriesMsgID: fmt.Sprintf("2026110%d.%d-0-tester@example.org", i%10, i),
			SeriesTitle: fmt.Sprintf("powerpc: enable dynamic preemption (fixture %d)", i), SeriesVersion: 1 + i%3,
			Tree: "/srv/linux.git", Base: "830b3c68c1fb1e9176028d02ef86f3cf76aa2476"})
		if err != nil {
			tb.Fatal(err)
		}
		ids = append(ids, e.ID)
		for _, v := range variants {
			if _, err := st.RecordBuild(e.ID, store.Build{Variant: v, Arch: "ppc64le", Commit: "4f3c2a1b9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b",
				ConfigHash: "9a8b7c6d5e4f", Status: "ok"}); err != nil {
				tb.Fatal(err)
			}
		}
		var all []evaluate.Sample
		for b := 0; b < boots; b++ {
			for vi, v := range variants {
				runID, err := st.BeginRun(e.ID, v, b)
				if err != nil {
					tb.Fatal(err)
				}
				var samples []evaluate.Sample
				for it := 0; it < 5; it++ {
					wobble := math.Sin(float64(i*31+b*7+it*3+vi)) * 4
					kill := 1480 + float64(vi)*220 + wobble
					if vi == 2 {
						kill = 1495 + wobble
					}
					samples = append(samples,
						evaluate.Sample{Variant: v, Boot: b, Iteration: it, Benchmark: "kill", Metric: "ns/op", Unit: "ns", Value: kill},
						evaluate.Sample{Variant: v, Boot: b, Iteration: it, Benchmark: "getppid", Metric: "ns/op", Unit: "ns", Value: 212 + wobble/4})
				}
				console := fmt.Sprintf("[    0.000000] Linux version 6.1.0-patcheval (%s)\n[    0.412000] Run /init as init process\npatcheval-agent: kill %d iterations\npatcheval-agent: done\n", v, 5)
				env := evaluate.Environment{KernelRelease: "6.1.0-patcheval", Target: "qemu", Deterministic: true}
				if err := st.FinishRun(runID, store.RunOK, env, []byte(console), samples); err != nil {
					tb.Fatal(err)
				}
				all = append(all, samples...)
			}
		}
		if err := st.SetEvaluationStatus(e.ID, "done"); err != nil {
			tb.Fatal(err)
		}
		err = st.Tx(context.Background(), func(tx *store.Tx) error {
			if err := st.RecordAppliedTx(tx, e.ID, store.Applied{Head: "5d1e0c2b3a4f", Tree: "/srv/linux.git", Branch: fmt.Sprintf("patcheval/%d", e.ID),
				Commits: []store.AppliedCommit{{Hash: "1a2b3c4d5e6f", Subject: "powerpc: add PREEMPT_DYNAMIC"}, {Hash: "5d1e0c2b3a4f", Subject: "powerpc: static calls for preempt"}}}); err != nil {
				return err
			}
			for j, stage := range []string{"apply", "build", "boot", "report"} {
				if err := st.AddTimingTx(tx, e.ID, stage, time.Duration(j+1)*7*time.Second, ""); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			tb.Fatal(err)
		}
		recordJobs(tb, s, e.ID, variants, boots)
		r := &report.Report{Title: "ppc-preempt-dynamic", ID: fmt.Sprintf("ppc-preempt-dynamic-%d", e.ID), Generated: time.Now().UTC(),
			Arch: "ppc64le", Interleaved: true,
			Confounds: []report.Confound{{Base: "voluntary", Other: "voluntary+dyn", Deltas: []report.ConfigDelta{
				{Symbol: "PREEMPT_DYNAMIC", From: "n", To: "y", Requested: true},
				{Symbol: "PREEMPT_RCU", From: "n", To: "y", Rule: "default y if PREEMPTION", Where: "kernel/rcu/Kconfig:21", Highlight: true},
				{Symbol: "PREEMPT_BUILD", From: "n", To: "y", Rule: "PREEMPT_DYNAMIC: select PREEMPT_BUILD", Where: "kernel/Kconfig.preempt:88"},
			}}}}
		for _, v := range variants {
			r.Variants = append(r.Variants, report.Variant{Name: v, Boots: boots})
		}
		if err := r.AddResults(all, report.Spec{Comparisons: []report.Pair{{Base: "voluntary", Other: "voluntary+dyn"}, {Base: "voluntary", Other: "full"}}}); err != nil {
			tb.Fatal(err)
		}
		dir := s.OutDir(e.ID)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			tb.Fatal(err)
		}
		f, err := os.Create(filepath.Join(dir, "report.json"))
		if err != nil {
			tb.Fatal(err)
		}
		if err := report.WriteJSON(f, r); err != nil {
			tb.Fatal(err)
		}
		f.Close()
		draft := "From: Kernel Tester <tester@example.org>\nSubject: Re: [PATCH 0/2] powerpc: enable dynamic preemption\n\nkill ns/op voluntary -> voluntary+dyn: +14.9% (regression)\nPREEMPT_RCU n -> y (kernel/rcu/Kconfig:21 default y if PREEMPTION)\n"
		if err := os.WriteFile(filepath.Join(dir, "reply.eml"), []byte(draft), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	return ids
}

// recordJobs stores the completed River jobs of a finished evaluation:
// apply, a build per variant, a boot per variant and boot, the plan of
// the boots, the report.
func recordJobs(tb testing.TB, s *Service, id int64, variants []string, boots int) {
	tb.Helper()
	now := time.Now().UTC()
	var jobs []*riverdriver.JobInsertFullParams
	add := func(args river.JobArgs, queue string) {
		enc, _ := json.Marshal(args)
		jobs = append(jobs, &riverdriver.JobInsertFullParams{Attempt: 1, AttemptedAt: &now, AttemptedBy: []string{"patcheval_fixture"},
			CreatedAt: &now, EncodedArgs: enc, FinalizedAt: &now, Kind: args.Kind(), MaxAttempts: 5, Metadata: []byte(`{}`),
			Priority: 1, Queue: queue, ScheduledAt: &now, State: rivertype.JobStateCompleted, Tags: []string{evalTag(id)}})
	}
	add(ApplyArgs{EvaluationID: id, Gen: 1}, QueueApply)
	for _, v := range variants {
		add(BuildArgs{EvaluationID: id, Gen: 1, Key: "ppc64le-" + v}, QueueBuild)
	}
	add(MoreArgs{EvaluationID: id, Gen: 1, Initial: true}, QueueMore)
	for b := 0; b < boots; b++ {
		for _, v := range variants {
			add(BootArgs{EvaluationID: id, Gen: 1, Boot: evaluate.BootKey{Variant: v, Boot: b}}, QueueBoot)
		}
	}
	add(ReportArgs{EvaluationID: id, Gen: 1}, QueueReport)
	p := &riverdriver.JobInsertFullManyParams{Jobs: jobs}
	var err error
	if s.db.Postgres() {
		_, err = s.db.pgDriver.GetExecutor().JobInsertFullMany(context.Background(), p)
	} else {
		_, err = s.db.sqliteDriver.GetExecutor().JobInsertFullMany(context.Background(), p)
	}
	if err != nil {
		tb.Fatal(err)
	}
}
