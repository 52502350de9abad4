package main

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/evaluate/guest"
	"github.com/patcheval/patcheval/pipelines/store"
)

// runEvaluation opens the state database and finds (or creates) the
// evaluation of `patcheval run`'s kernels and plan, so that every boot is
// kept like `lore --pipeline` keeps it (the store's BootRecorder) and the
// same command again resumes instead of redoing finished boots. `patcheval
// runs` shows them. The caller closes st.
func runEvaluation(variants []evaluate.RunVariant, plan guest.Plan, boots int) (st *store.Store, rec *store.BootRecorder, err error) {
	st, err = store.Open("")
	if err != nil {
		return nil, nil, err
	}
	planJSON, _ := json.Marshal(plan)
	parts := []string{"run", string(planJSON), fmt.Sprint(boots)}
	var names []string
	for _, v := range variants {
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
	return st, &store.BootRecorder{Store: st, EvalID: ev.ID}, nil
}
