package dashboard

import (
	"fmt"
	"strings"

	"github.com/patcheval/patcheval/pipelines/store"
)

// why is a failed evaluation's headline: the first stage that failed and
// its reason in one line.
type why struct {
	Stage  string // "apply", "build voluntary/ppc64le", "boot base #2"
	Reason string
}

func (w *why) String() string { return w.Stage + ": " + w.Reason }

// whyFailed says why evaluation e failed, from what its stages recorded,
// in stage order: the series did not apply, a kernel did not build, a
// boot failed. nil for an evaluation that did not fail.
func whyFailed(st *store.Store, e *store.Evaluation) *why {
	if e.Status != store.StatusFailed {
		return nil
	}
	if f, err := st.ApplyFailureOf(e.ID); err == nil && f != nil {
		return &why{"apply", f.Summary()}
	}
	if builds, err := st.BuildsOf(e.ID); err == nil {
		for _, b := range builds {
			if b.Status != "ok" && b.Status != "" && (b.ErrorText != "" || b.Status == "failed" || b.Status == "infra") {
				return &why{fmt.Sprintf("build %s/%s", b.Variant, b.Arch), oneLine(b.ErrorText, b.Status)}
			}
		}
	}
	if runs, err := st.RunsOf(e.ID); err == nil {
		for _, r := range runs {
			if r.Status == store.RunFailed || r.Status == store.RunInfra {
				return &why{fmt.Sprintf("boot %s #%d", r.Variant, r.Boot+1), oneLine(r.ErrorText, string(r.Status))}
			}
		}
	}
	return &why{"evaluation", "no stage recorded a reason: see its jobs below"}
}

// oneLine is the first line of an error that says something (not a
// blank or a "---" separator), at most 200 characters; else fallback.
func oneLine(text, fallback string) string {
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "---") {
			continue
		}
		if len(l) > 200 {
			l = l[:197] + "..."
		}
		return l
	}
	return fallback
}
