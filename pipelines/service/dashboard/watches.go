package dashboard

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/patcheval/patcheval/pipelines/experiments/bisect"
	"github.com/patcheval/patcheval/pipelines/experiments/watch"
	"github.com/patcheval/patcheval/pipelines/store"
)

// ---- watches ----

type watchRow struct {
	*store.Watch
	Entries, Events int
}

func (d *Dashboard) watches(w http.ResponseWriter, r *http.Request) {
	ws, err := d.src.Store().Watches()
	if err != nil {
		d.fail(w, err)
		return
	}
	var rows []watchRow
	for _, x := range ws {
		tags, err := d.src.Store().WatchTags(x.ID)
		if err != nil {
			d.fail(w, err)
			return
		}
		evs, err := d.src.Store().WatchEvents(x.ID)
		if err != nil {
			d.fail(w, err)
			return
		}
		rows = append(rows, watchRow{x, len(tags), len(evs)})
	}
	d.render(w, "watches", struct {
		page
		Rows []watchRow
	}{page{Title: "Watches", Where: d.opt.Where}, rows})
}

// cell is one tag's value of one series in the history table.
type cell struct {
	Text, Title string
}

type historyRow struct {
	watch.TagEntry
	Cells []cell
}

type bisectView struct {
	bisect.Result
	Error string `json:"error"`
	Kind  string `json:"kind"`
}

type eventView struct {
	*store.WatchEvent
	Bisect *bisectView
}

func (d *Dashboard) history(w http.ResponseWriter, r *http.Request) (*watch.History, bool) {
	x, err := d.src.Store().FindWatch(r.PathValue("name"))
	if err != nil {
		d.fail(w, err)
		return nil, false
	}
	h, err := watch.Load(d.src.Store(), x)
	if err != nil {
		d.fail(w, err)
		return nil, false
	}
	return h, true
}

func (d *Dashboard) watchPage(w http.ResponseWriter, r *http.Request) {
	h, ok := d.history(w, r)
	if !ok {
		return
	}
	var rows []historyRow
	for i, t := range h.Tags {
		row := historyRow{TagEntry: t}
		for _, s := range h.Series {
			p := s.Values[i]
			c := cell{Text: "–"}
			switch {
			case p.N == 0:
			case p.CILow == p.CIHigh:
				c = cell{Text: num(p.Mean), Title: fmt.Sprintf("n=%d, all samples equal", p.N)}
			default:
				c = cell{Text: fmt.Sprintf("%s [%s, %s]", num(p.Mean), num(p.CILow), num(p.CIHigh)),
					Title: fmt.Sprintf("n=%d, stddev %s, 95%% CI", p.N, num(p.StdDev))}
			}
			row.Cells = append(row.Cells, c)
		}
		rows = append(rows, row)
	}
	var events []eventView
	for _, e := range h.Events {
		v := eventView{WatchEvent: e}
		if len(e.Bisect) > 0 {
			v.Bisect = &bisectView{}
			if err := json.Unmarshal(e.Bisect, v.Bisect); err != nil {
				v.Bisect.Status, v.Bisect.Error = "unreadable", err.Error()
			}
		}
		events = append(events, v)
	}
	d.render(w, "watch", struct {
		page
		H      *watch.History
		Rows   []historyRow
		Events []eventView
	}{page{Title: "watch " + h.Watch.Name, Where: d.opt.Where}, h, rows, events})
}

// watchPlot is the watch's plot: per series the value per tag with its
// 95% CI as a band, events marked (the same SVG as watch show --svg).
func (d *Dashboard) watchPlot(w http.ResponseWriter, r *http.Request) {
	h, ok := d.history(w, r)
	if !ok {
		return
	}
	var buf bytes.Buffer
	if err := watch.WriteSVG(&buf, h); err != nil {
		d.fail(w, err)
		return
	}
	w.Header().Set("Content-Type", "image/svg+xml")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Write(buf.Bytes())
}
