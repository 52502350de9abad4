package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/evaluate/store"
	"github.com/patcheval/patcheval/internal/fail"
)

// `patcheval run` keeps every boot in the state database like `lore
// --pipeline` does: the evaluation is keyed by the kernels and the plan, so
// running the same command again resumes instead of redoing finished boots.
// `patcheval runs` shows them.
var runStore struct {
	st     *store.Store
	evalID int64
}

func init() {
	runDone = func(ctx context.Context, rp *evaluate.RunPlan) (map[evaluate.BootKey]bool, error) {
		st, err := store.Open("")
		if err != nil {
			return nil, err
		}
		plan, _ := json.Marshal(rp.Plan)
		parts := []string{"run", string(plan), fmt.Sprint(rp.Boots)}
		var names []string
		for _, v := range rp.Variants {
			k := v.Kernel
			parts = append(parts, k.Variant, k.Arch, k.Image, k.Cmdline, v.Preempt)
			names = append(names, k.Variant)
		}
		sort.Strings(names)
		ev, _, err := st.CreateOrResumeEvaluation(store.Key(parts...),
			store.EvaluationMeta{Pipeline: "run: " + strings.Join(names, " vs ")})
		if err != nil {
			st.Close()
			return nil, err
		}
		if runStore.st != nil {
			runStore.st.Close()
		}
		runStore.st, runStore.evalID = st, ev.ID
		finished, err := st.FinishedRuns(ev.ID)
		if err != nil {
			return nil, err
		}
		done := map[evaluate.BootKey]bool{}
		for k := range finished {
			done[evaluate.BootKey{Variant: k.Variant, Boot: k.Boot}] = true
		}
		return done, nil
	}
	runSink = func(ctx context.Context, rec evaluate.BootRecord) error {
		st := runStore.st
		if st == nil {
			return fail.Infraf("run: no state database open")
		}
		id, err := st.BeginRun(runStore.evalID, rec.Key.Variant, rec.Key.Boot)
		if err != nil {
			return err
		}
		status := store.RunOK
		var env evaluate.Environment
		var console []byte
		if rec.Result != nil {
			env, console = rec.Result.Env, rec.Result.Console
		}
		if rec.Err != nil {
			status = store.RunFailed
			if fail.KindOf(rec.Err) == fail.KindInfra {
				status = store.RunInfra
			}
		}
		return st.FinishRunErr(id, status, env, console, rec.Samples, rec.Err)
	}
}
