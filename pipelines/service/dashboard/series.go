package dashboard

import (
	"net/http"
	"sort"
	"strings"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/pipelines/store"
)

// ---- followed series (the list follower of issue 13) ----

// SeriesView is one version of a series seen on a followed list, as the
// /series page and GET /api/v1/series show it: the follower's row
// (collecting, incomplete, filtered, superseded, submitted, failed, with
// the reason) and, once submitted, its evaluation's status.
type SeriesView struct {
	*store.FollowSeries
	// EvaluationStatus is the status of the evaluation (queued, running,
	// done, failed, cancelled); empty when none was created.
	EvaluationStatus string `json:"evaluation_status,omitempty"`
	// Link is the series' first message on the list's public-inbox.
	Link string `json:"link,omitempty"`
}

// FollowedSeries lists the followed lists' series, the last changed
// first: of list (all when empty), in status (all when empty).
func FollowedSeries(st *store.Store, list, status string) ([]SeriesView, error) {
	all, err := st.FollowSeriesList(list, status)
	if err != nil {
		return nil, err
	}
	urls := map[string]string{}
	out := make([]SeriesView, 0, len(all))
	for _, s := range all {
		v := SeriesView{FollowSeries: s}
		if s.EvaluationID > 0 {
			ev, err := st.Evaluation(s.EvaluationID)
			switch {
			case err == nil:
				v.EvaluationStatus = ev.Status
			case fail.KindOf(err) != fail.KindInput:
				return nil, err
			}
		}
		u, ok := urls[s.List]
		if !ok {
			l, err := st.FollowListState(s.List)
			if err != nil {
				return nil, err
			}
			u = strings.TrimRight(l.URL, "/")
			urls[s.List] = u
		}
		if u != "" && s.MsgID != "" {
			v.Link = u + "/" + s.MsgID + "/"
		}
		out = append(out, v)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Updated.After(out[j].Updated) })
	return out, nil
}

func (d *Dashboard) series(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	rows, err := FollowedSeries(d.src.Store(), q.Get("list"), q.Get("status"))
	if err != nil {
		d.fail(w, err)
		return
	}
	d.render(w, "series", struct {
		page
		Rows         []SeriesView
		Statuses     []string
		List, Status string
	}{page{Title: "followed series", Where: d.opt.Where, Refresh: 60}, rows, store.FollowStatuses, q.Get("list"), q.Get("status")})
}
