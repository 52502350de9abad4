package service

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/patcheval/patcheval/internal/testinbox"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/pipelines/bots/follow"
	"github.com/patcheval/patcheval/pipelines/store"
	"github.com/patcheval/patcheval/series"
)

// followQueue is the follower's Submitter in this test: it creates the
// evaluation in the store as "queued" and cancels it as "cancelled",
// what the service's submission does before a worker takes the job (the
// stages need kernels and stay out of this test).
type followQueue struct{ st *store.Store }

func (q followQueue) Submit(ctx context.Context, l follow.List, s *series.Series, t *mbox.Thread) (int64, error) {
	first := s.First()
	ev, _, err := q.st.CreateOrResumeEvaluation(store.Key("follow", l.Pipeline, first.MessageID, fmt.Sprint(s.Version)),
		store.EvaluationMeta{Pipeline: l.Pipeline, SeriesMsgID: first.MessageID, SeriesTitle: s.Title, SeriesVersion: s.Version})
	if err != nil {
		return 0, err
	}
	return ev.ID, q.st.SetEvaluationStatus(ev.ID, "queued")
}

func (q followQueue) Cancel(ctx context.Context, id int64) error {
	return q.st.SetEvaluationStatus(id, "cancelled")
}

// patchMails is version v of series id: a cover letter and the patches
// listed in parts (1-based; fewer than n leaves the series incomplete),
// each touching file; the cover answers inReplyTo when set.
func patchMails(id, author, title string, v, n int, parts []int, file, inReplyTo string) []byte {
	ver := ""
	if v > 1 {
		ver = fmt.Sprintf(" v%d", v)
	}
	cover := fmt.Sprintf("%s-v%d-0@example.org", id, v)
	var b strings.Builder
	msg := func(subj, msgid, irt, refs, body string) {
		fmt.Fprintf(&b, "From mboxrd@z Thu Jan  1 00:00:00 1970\nFrom: %s\nTo: test@example.org\nSubject: %s\nDate: %s\nMessage-ID: <%s>\n",
			author, subj, time.Now().Format(time.RFC1123Z), msgid)
		if irt != "" {
			fmt.Fprintf(&b, "In-Reply-To: <%s>\nReferences: %s\n", irt, refs)
		}
		fmt.Fprintf(&b, "MIME-Version: 1.0\nContent-Type: text/plain; charset=UTF-8\n\n%s\n", body)
	}
	refs := ""
	if inReplyTo != "" {
		refs = "<" + inReplyTo + "> "
	}
	msg(fmt.Sprintf("[PATCH%s 0/%d] %s", ver, n, title), cover, inReplyTo, strings.TrimSpace(refs), "The cover letter.\n")
	for _, i := range parts {
		msg(fmt.Sprintf("[PATCH%s %d/%d] %s: part %d", ver, i, n, title, i), fmt.Sprintf("%s-v%d-%d@example.org", id, v, i), cover, refs+"<"+cover+">",
			fmt.Sprintf("Part %d.\n\nSigned-off-by: %s\n---\n %s | 1 +\n 1 file changed, 1 insertion(+)\n\n"+
				"diff --git a/%s b/%s\nindex 1111111..2222222 100644\n--- a/%s\n+++ b/%s\n@@ -1,1 +1,2 @@\n line\n+%s v%d %d\n-- \n2.39.2\n",
				i, author, file, file, file, file, file, id, v, i))
	}
	return []byte(b.String())
}

// TestSeriesPage: the dashboard's /series page and GET /api/v1/series
// show what the follower did with each series it read from a real
// public-inbox: an incomplete series (shown, never evaluated), one the
// path filter left alone (with why), and a v1 superseded by its v2 (both
// listed; v1 names v2 and its cancelled evaluation, v2 links its queued
// evaluation); the navigation links to the page.
func TestSeriesPage(t *testing.T) {
	s, base := testService(t, Config{})
	st := s.Store()
	dir := t.TempDir()
	write := func(name string, mails ...[]byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(strings.Join(func() []string {
			var out []string
			for _, m := range mails {
				out = append(out, string(m))
			}
			return out
		}(), "")), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	srv := testinbox.StartWith(t, testinbox.Options{Bulk: true, NoAll: true})
	l := follow.List{Name: "test", URL: srv.URL + "/" + srv.Inbox, Pipeline: "selinux-tax", Paths: []string{"arch/powerpc/**"},
		Since: time.Now().Add(-time.Hour), IncompleteAfter: time.Nanosecond}
	f := &follow.Follower{Store: st, Lists: []follow.List{l}, Submit: followQueue{st}, Dir: filepath.Join(dir, "mirrors")}
	ctx := context.Background()

	ppc := "arch/powerpc/kernel/time.c"
	srv.Add(t, write("v1.mbox",
		patchMails("aaa", "Ann Dev <ann@example.org>", "powerpc/time: faster decrementer", 1, 2, []int{1, 2}, ppc, ""),
		patchMails("ccc", "Cid <c@example.org>", "powerpc/mm: half there", 1, 3, []int{1}, ppc, ""),
		patchMails("xxx", "Xavier <x@example.org>", "x86/tsc: calibrate faster", 1, 1, []int{1}, "arch/x86/kernel/tsc.c", "")))
	if err := f.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	srv.Add(t, write("v2.mbox",
		patchMails("aaa", "Ann Dev <ann@example.org>", "powerpc/time: faster decrementer", 2, 2, []int{1, 2}, ppc, "aaa-v1-0@example.org")))
	if err := f.Poll(ctx); err != nil {
		t.Fatal(err)
	}

	by := map[string]*store.FollowSeries{}
	all, err := st.FollowSeriesList("", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range all {
		by[fmt.Sprintf("%s v%d", x.Title, x.Version)] = x
	}
	v1, v2 := by["powerpc/time: faster decrementer v1"], by["powerpc/time: faster decrementer v2"]
	inc, x86 := by["powerpc/mm: half there v1"], by["x86/tsc: calibrate faster v1"]
	if len(all) != 4 || v1 == nil || v2 == nil || inc == nil || x86 == nil {
		t.Fatalf("the follower stored %d series %v, want aaa v1, aaa v2, ccc v1, xxx v1", len(all), by)
	}
	if v1.Status != store.SeriesSuperseded || v2.Status != store.SeriesSubmitted || inc.Status != store.SeriesIncomplete || x86.Status != store.SeriesFiltered {
		t.Fatalf("states v1 %s, v2 %s, incomplete %s, x86 %s", v1.Status, v2.Status, inc.Status, x86.Status)
	}

	code, _, home := get(t, base+"/")
	if code != 200 || !strings.Contains(home, `<a href="/series">series</a>`) {
		t.Fatalf("GET / = %d: no link to the series", code)
	}
	code, _, page := get(t, base+"/series")
	if code != 200 {
		t.Fatalf("GET /series = %d\n%s", code, page)
	}
	table := section(t, page, "series")
	row := func(x *store.FollowSeries) string {
		t.Helper()
		m := regexp.MustCompile(fmt.Sprintf(`(?s)<tr id="series-%d">.*?</tr>`, x.ID)).FindString(table)
		if m == "" {
			t.Fatalf("no row for %s v%d:\n%s", x.Title, x.Version, table)
		}
		return m
	}
	link := func(x *store.FollowSeries) string {
		return fmt.Sprintf(`<a href="%s/%s/">%s</a>`, l.URL, x.MsgID, x.Title)
	}
	for _, c := range []struct {
		x    *store.FollowSeries
		want []string
		not  []string
	}{
		{inc, []string{link(inc), "<td>test</td>", "v1", "c@example.org", "<td class=\"n\">1/3</td>", `<span class="st st-incomplete">incomplete</span>`, "1 of 3 patches after"},
			[]string{"/evaluations/"}},
		{x86, []string{link(x86), "x@example.org", "1/1", `<span class="st st-filtered">filtered</span>`, "touches none of arch/powerpc/**"},
			[]string{"/evaluations/"}},
		{v1, []string{link(v1), "ann@example.org", "2/2", `<span class="st st-superseded">superseded</span>`,
			"v2 arrived (aaa-v2-0@example.org)", fmt.Sprintf("evaluation %d cancelled", v1.EvaluationID),
			fmt.Sprintf(`<a href="/evaluations/%d">evaluation #%d</a> <span class="st st-cancelled">cancelled</span>`, v1.EvaluationID, v1.EvaluationID)}, nil},
		{v2, []string{link(v2), "<td class=\"n\">v2</td>", "2/2", `<span class="st st-submitted">submitted</span>`,
			fmt.Sprintf(`<a href="/evaluations/%d">evaluation #%d</a> <span class="st st-queued">queued</span>`, v2.EvaluationID, v2.EvaluationID)}, nil},
	} {
		r := row(c.x)
		for _, w := range c.want {
			if !strings.Contains(r, w) {
				t.Errorf("%s v%d's row lacks %q:\n%s", c.x.Title, c.x.Version, w, r)
			}
		}
		for _, w := range c.not {
			if strings.Contains(r, w) {
				t.Errorf("%s v%d's row has %q:\n%s", c.x.Title, c.x.Version, w, r)
			}
		}
	}
	if v1.EvaluationID == 0 || v1.EvaluationID == v2.EvaluationID {
		t.Errorf("v1's evaluation %d, v2's %d: want two evaluations", v1.EvaluationID, v2.EvaluationID)
	}
	code, _, filtered := get(t, base+"/series?status=incomplete")
	if code != 200 || strings.Count(section(t, filtered, "series"), `<tr id="series-`) != 1 || !strings.Contains(filtered, "powerpc/mm: half there") {
		t.Errorf("GET /series?status=incomplete = %d:\n%s", code, filtered)
	}

	code, _, body := get(t, base+"/api/v1/series")
	var api struct {
		Series []struct {
			ID               int64  `json:"id"`
			Version          int    `json:"version"`
			Status           string `json:"status"`
			Reason           string `json:"reason"`
			Found            int    `json:"found"`
			Total            int    `json:"total"`
			EvaluationID     int64  `json:"evaluation_id"`
			EvaluationStatus string `json:"evaluation_status"`
		} `json:"series"`
	}
	if err := json.Unmarshal([]byte(body), &api); code != 200 || err != nil || len(api.Series) != 4 {
		t.Fatalf("GET /api/v1/series = %d, %v: %s", code, err, body)
	}
	for _, x := range api.Series {
		switch x.ID {
		case v1.ID:
			if x.Status != "superseded" || x.EvaluationStatus != "cancelled" || !strings.Contains(x.Reason, "v2 arrived") {
				t.Errorf("API v1: %+v", x)
			}
		case v2.ID:
			if x.Status != "submitted" || x.EvaluationID != v2.EvaluationID || x.EvaluationStatus != "queued" {
				t.Errorf("API v2: %+v", x)
			}
		case inc.ID:
			if x.Status != "incomplete" || x.Found != 1 || x.Total != 3 || x.EvaluationID != 0 {
				t.Errorf("API incomplete: %+v", x)
			}
		}
	}
	if code, _, body := get(t, base+"/api/v1/series?status=nosuch"); code != 400 || !strings.Contains(body, `"field": "status"`) {
		t.Errorf("GET /api/v1/series?status=nosuch = %d %s, want 400 naming the field", code, body)
	}
}
