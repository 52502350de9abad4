package service

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river/rivertype"

	"github.com/patcheval/patcheval/evaluate/report"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/pipelines/store"
)

// events records Config.Notify calls; the first "queued" call fails
// (River retries it). The queued and failed jobs may run in either order.
type events struct {
	mu     sync.Mutex
	calls  []string
	failed bool
}

func (e *events) notify(_ context.Context, id int64, event string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls = append(e.calls, fmt.Sprintf("%d %s", id, event))
	if event == EventQueued && !e.failed {
		e.failed = true
		return fail.Infraf("the reporters' store is busy")
	}
	return nil
}

func (e *events) list() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.calls...)
}

type approvals struct {
	mu  sync.Mutex
	ids []int64
}

func (a *approvals) Approve(_ context.Context, id int64) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ids = append(a.ids, id)
	return nil
}

// TestNotifyQueuedAndFailed: with Config.Notify, a submission inserts a
// "notify queued" job with its apply job, and an evaluation that fails
// (here: the series does not apply to the tree) a "notify failed" job;
// River runs them (retrying a failed Notify) and cancelling the
// evaluation's jobs leaves them alone.
func TestNotifyQueuedAndFailed(t *testing.T) {
	root := t.TempDir()
	tree := gitRepo(t, filepath.Join(root, "linux"))
	ev := &events{}
	const tok = "0123456789abcdef-test-token"
	s, base := testService(t, Config{AllowTrees: []string{root}, Notify: ev.notify, Token: []byte(tok)})
	data, err := os.ReadFile(backport)
	if err != nil {
		t.Fatal(err)
	}
	code, _, raw := call(t, "POST", base+"/api/v1/evaluations", tok, SubmitRequest{Mbox: string(data), Pipeline: "ppc-preempt-dynamic",
		Tree: tree, Base: "HEAD", Boots: 1})
	if code != 201 {
		t.Fatalf("submit: %d %s", code, raw)
	}
	var sub SubmitResponse
	json.Unmarshal(raw, &sub)
	id := sub.Evaluation.ID
	want := []string{fmt.Sprintf("%d failed", id), fmt.Sprintf("%d queued", id), fmt.Sprintf("%d queued", id)}
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		got := ev.list()
		sort.Strings(got) // the retry of the failed call may come last
		if strings.Join(got, ",") == strings.Join(want, ",") {
			break
		}
		if time.Now().After(deadline) || len(got) >= len(want) {
			e, _ := s.Store().Evaluation(id)
			t.Fatalf("Notify calls %v, want %v (evaluation %s)", got, want, e.Status)
		}
	}
	if e, _ := s.Store().Evaluation(id); e.Status != "failed" {
		t.Errorf("evaluation %s, want failed", e.Status)
	}
	jobs, err := s.Engine().Jobs(t.Context(), 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var notify []string
	for _, j := range jobs {
		if j.Kind == "notify" {
			notify = append(notify, string(j.State))
		}
	}
	for deadline := time.Now().Add(10 * time.Second); strings.Join(notify, ",") != "completed,completed" && time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond)
		jobs, _ = s.Engine().Jobs(t.Context(), 0, 100, rivertype.JobStateCompleted)
		notify = notify[:0]
		for _, j := range jobs {
			if j.Kind == "notify" {
				notify = append(notify, string(j.State))
			}
		}
	}
	if strings.Join(notify, ",") != "completed,completed" {
		t.Errorf("notify jobs %v, want both completed", notify)
	}
}

// TestDashboardPostsAndApprove: /posts lists the reporters' outbox (with
// each post's state, attempts and last error) and the held reply mails
// with an Approve button; approving is a mutating request under the
// service's token rules.
func TestDashboardPostsAndApprove(t *testing.T) {
	const tok = "0123456789abcdef-test-token"
	ap := &approvals{}
	s, base := testService(t, Config{Token: []byte(tok), Posts: ap})
	st := s.Store()
	e, _, err := st.CreateOrResumeEvaluation("k", store.EvaluationMeta{Pipeline: "ppc-preempt-dynamic"})
	if err != nil {
		t.Fatal(err)
	}
	d := report.Draft{From: mbox.Address{Email: "bot@example.com"}, To: []mbox.Address{{Email: "ann@example.org"}},
		Subject: "Re: [PATCH 0/2] powerpc: faster timers", Body: "kill ns/op +25%: regression\n"}
	b, _ := json.Marshal(d)
	held, err := st.EnqueuePost(store.Post{Reporter: "mail/ppc", Target: "t1", EvaluationID: e.ID, Digest: "d1", Payload: string(b)}, true)
	if err != nil {
		t.Fatal(err)
	}
	pw, err := st.EnqueuePost(store.Post{Reporter: "patchwork/ppc", Target: "m@x patcheval-p", EvaluationID: e.ID, State: "warning", Digest: "d2", Payload: "{}"}, false)
	if err != nil {
		t.Fatal(err)
	}
	st.MarkPostSending(pw.ID, "")
	st.RetryPost(pw.ID, fmt.Errorf("patchwork: patch <m@x> is not (yet) in Patchwork"), time.Now().Add(time.Minute))

	get := func(path string) (int, string) {
		req, _ := http.NewRequest("GET", base+path, nil)
		req.SetBasicAuth("", tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var sb strings.Builder
		buf := make([]byte, 1<<16)
		for {
			n, err := resp.Body.Read(buf)
			sb.Write(buf[:n])
			if err != nil {
				break
			}
		}
		return resp.StatusCode, sb.String()
	}
	code, page := get("/posts")
	for _, want := range []string{"Held replies", "Re: [PATCH 0/2] powerpc: faster timers", "ann@example.org", "kill ns/op &#43;25%: regression",
		fmt.Sprintf(`action="/posts/%d/approve"`, held.ID), "patchwork/ppc", "not (yet) in Patchwork", `st-queued`} {
		if code != 200 || !strings.Contains(page, want) {
			t.Errorf("/posts: %d, missing %q", code, want)
		}
	}
	approve := fmt.Sprintf("%s/posts/%d/approve", base, held.ID)
	if code, _, _ := call(t, "POST", approve, "", ""); code != 401 {
		t.Errorf("approve without the token: %d, want 401", code)
	}
	if code, _, _ := call(t, "POST", approve, tok+"x", ""); code != 401 {
		t.Errorf("approve with a wrong token: %d, want 401", code)
	}
	if len(ap.ids) != 0 {
		t.Fatalf("approved without the token: %v", ap.ids)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, _ := http.NewRequest("POST", approve, nil)
	req.SetBasicAuth("", tok) // the browser's way
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/posts" || len(ap.ids) != 1 || ap.ids[0] != held.ID {
		t.Errorf("approve with the token: %d %q, approved %v", resp.StatusCode, resp.Header.Get("Location"), ap.ids)
	}
	if code, _, _ := call(t, "POST", base+"/posts/x/approve", tok, ""); code != 404 {
		t.Errorf("approve of a bad id: %d, want 404", code)
	}
	if code, _ := get("/posts?status=held"); code != 200 {
		t.Errorf("/posts?status=held: %d", code)
	}
	// The evaluation's page lists its posts too.
	if code, page := get(fmt.Sprintf("/evaluations/%d", e.ID)); code != 200 || !strings.Contains(page, "patchwork/ppc") ||
		!strings.Contains(page, "not (yet) in Patchwork") {
		t.Errorf("evaluation page: %d, no posts listed", code)
	}
}
