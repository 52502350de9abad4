package main

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/evaluate/store"
)

// runRecorder keeps every boot of `patcheval run` in the state database
// like `lore --pipeline` does: the evaluation is keyed by the kernels and
// the plan, so running the same command again resumes instead of redoing
// finished boots. `patcheval runs` shows them.
type runRecorder struct {
	st     *store.Store
	evalID int64
}

// openRunRecorder opens the state database and finds (or creates) rp's
// evaluation; done is the boots it already finished.
func openRunRecorder(rp *evaluate.RunPlan) (rr *runRecorder, done map[evaluate.BootKey]bool, err error) {
	st, err := store.Open("")
	if err != nil {
		return nil, nil, err
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
		return nil, nil, err
	}
	if done, err = st.FinishedRuns(ev.ID); err != nil {
		st.Close()
		return nil, nil, err
	}
	return &runRecorder{st: st, evalID: ev.ID}, done, nil
}

// record stores one finished (or failed) boot with its samples.
func (r *runRecorder) record(rec evaluate.BootRecord) error { return r.st.RecordBoot(r.evalID, rec) }

func (r *runRecorder) Close() error { return r.st.Close() }
