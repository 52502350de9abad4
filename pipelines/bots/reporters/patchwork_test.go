package reporters

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/patcheval/patcheval/pipelines/store"
)

// fakePatchwork is an httptest server that follows Patchwork's documented
// REST API 1.2 for what the reporter uses (Patchwork itself cannot run
// here): GET /api/1.2/patches/?msgid= (a JSON array, empty when no patch
// has that Message-ID), GET /api/1.2/patches/{id}/checks/?context= (a
// JSON array, paged with Link: rel="next") and POST
// /api/1.2/patches/{id}/checks/ (Authorization: Token; 201 with the
// check; 400 for an invalid state, as Django REST framework answers; 401
// for a bad token; 404 for an unknown patch; 429 with Retry-After when
// throttled).
type fakePatchwork struct {
	*httptest.Server
	token string
	mu    sync.Mutex
	// patches maps Message-IDs to ids; checks are per patch id.
	patches map[string]int64
	checks  map[int64][]pwCheck
	nextID  int64
	posts   int
	// answer, when not 0, is the status of every POST (e.g. 422 from a
	// proxy in front).
	answer int
}

func newFakePatchwork(t *testing.T, token string) *fakePatchwork {
	f := &fakePatchwork{token: token, patches: map[string]int64{}, checks: map[int64][]pwCheck{}, nextID: 100}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/1.2/patches/", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		out := []pwPatch{}
		if id, ok := f.patches[r.URL.Query().Get("msgid")]; ok {
			out = append(out, pwPatch{ID: id, MsgID: "<" + r.URL.Query().Get("msgid") + ">"})
		}
		json.NewEncoder(w).Encode(out)
	})
	mux.HandleFunc("GET /api/1.2/patches/{id}/checks/", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
		if !f.known(id) {
			http.Error(w, `{"detail": "Not found."}`, http.StatusNotFound)
			return
		}
		var out []pwCheck
		for _, c := range f.checks[id] {
			if ctx := r.URL.Query().Get("context"); ctx == "" || c.Context == ctx {
				out = append(out, c)
			}
		}
		// One check per page, so that the client must follow the links.
		page, _ := strconv.Atoi(r.URL.Query().Get("page"))
		if page == 0 {
			page = 1
		}
		if page < len(out) {
			q := r.URL.Query()
			q.Set("page", strconv.Itoa(page+1))
			w.Header().Set("Link", fmt.Sprintf(`<%s%s?%s>; rel="next"`, f.URL, r.URL.Path, q.Encode()))
		}
		if page <= len(out) {
			out = out[page-1 : page]
		} else {
			out = []pwCheck{}
		}
		json.NewEncoder(w).Encode(out)
	})
	mux.HandleFunc("POST /api/1.2/patches/{id}/checks/", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if r.Header.Get("Authorization") != "Token "+f.token {
			http.Error(w, `{"detail": "Invalid token."}`, http.StatusUnauthorized)
			return
		}
		if f.answer == http.StatusTooManyRequests {
			// Django REST framework's throttling.
			w.Header().Set("Retry-After", "120")
			http.Error(w, `{"detail": "Request was throttled. Expected available in 120 seconds."}`, f.answer)
			return
		}
		if f.answer != 0 {
			http.Error(w, `{"detail": "refused"}`, f.answer)
			return
		}
		id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
		if !f.known(id) {
			http.Error(w, `{"detail": "Not found."}`, http.StatusNotFound)
			return
		}
		var c pwCheck
		if err := json.NewDecoder(r.Body).Decode(&c); err != nil {
			http.Error(w, `{"detail": "JSON parse error"}`, http.StatusBadRequest)
			return
		}
		switch c.State {
		case CheckPending, CheckSuccess, CheckWarning, CheckFail:
		default:
			http.Error(w, `{"state": ["\"`+c.State+`\" is not a valid choice."]}`, http.StatusBadRequest)
			return
		}
		f.nextID++
		c.ID = f.nextID
		c.URL = fmt.Sprintf("%s/api/1.2/patches/%d/checks/%d/", f.URL, id, c.ID)
		f.checks[id] = append(f.checks[id], c)
		f.posts++
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(c)
	})
	f.Server = httptest.NewServer(mux)
	t.Cleanup(f.Close)
	return f
}

func (f *fakePatchwork) known(id int64) bool {
	for _, v := range f.patches {
		if v == id {
			return true
		}
	}
	return false
}

func (f *fakePatchwork) add(msgid string, id int64) {
	f.mu.Lock()
	f.patches[msgid] = id
	f.mu.Unlock()
}

func (f *fakePatchwork) state() (posts int, checks map[int64][]pwCheck) {
	f.mu.Lock()
	defer f.mu.Unlock()
	checks = map[int64][]pwCheck{}
	for k, v := range f.checks {
		checks[k] = append([]pwCheck(nil), v...)
	}
	return f.posts, checks
}

func openStore(t *testing.T, path string) *store.Store {
	t.Helper()
	st, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func newEval(t *testing.T, st *store.Store) int64 {
	t.Helper()
	ev, _, err := st.CreateOrResumeEvaluation(store.Key("e", t.Name()), store.EvaluationMeta{Pipeline: "selinux-tax"})
	if err != nil {
		t.Fatal(err)
	}
	return ev.ID
}

func patchworkFor(t *testing.T, f *fakePatchwork, token string) *Patchwork {
	t.Helper()
	tf := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tf, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pw, err := NewPatchwork(f.URL, "", tf)
	if err != nil {
		t.Fatal(err)
	}
	return pw
}

// clock is a settable test clock.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func statuses(t *testing.T, st *store.Store) []string {
	t.Helper()
	ps, err := st.Posts(0, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for i := len(ps) - 1; i >= 0; i-- {
		out = append(out, ps[i].State+":"+ps[i].Status)
	}
	return out
}

func TestPatchworkFakeAPIChecksPerPatchPendingThenFinal(t *testing.T) {
	f := newFakePatchwork(t, "s3cret")
	f.add("p1@x", 1)
	f.add("p2@x", 2)
	st := openStore(t, filepath.Join(t.TempDir(), "db"))
	id := newEval(t, st)
	ob := &Outbox{Store: st, Reporters: []Reporter{patchworkFor(t, f, "s3cret")}}
	ctx := context.Background()
	msgids := []string{"<p1@x>", "p2@x"}
	if _, err := QueuePatchworkChecks(st, id, "selinux-tax", msgids, CheckPending, "queued", "http://127.0.0.1/e/1"); err != nil {
		t.Fatal(err)
	}
	if n, err := ob.Flush(ctx); err != nil || n != 2 {
		t.Fatalf("flush: %d, %v", n, err)
	}
	desc := "kill ns/op +24.8% (CI +24.7..+25.0%)"
	if _, err := QueuePatchworkChecks(st, id, "selinux-tax", msgids, CheckWarning, desc, "http://127.0.0.1/e/1"); err != nil {
		t.Fatal(err)
	}
	// The same again (a retried report stage) and a late "pending" are
	// skipped before they reach Patchwork.
	ps, _ := QueuePatchworkChecks(st, id, "selinux-tax", msgids, CheckWarning, desc, "http://127.0.0.1/e/1")
	ps2, _ := QueuePatchworkChecks(st, id, "selinux-tax", msgids, CheckPending, "queued", "http://127.0.0.1/e/1")
	for _, p := range append(ps, ps2...) {
		if p.Status != store.PostSkipped {
			t.Errorf("repeat/pending-after-final post %s %s: status %s, want skipped", p.Target, p.State, p.Status)
		}
	}
	if n, err := ob.Flush(ctx); err != nil || n != 2 {
		t.Fatalf("flush: %d, %v", n, err)
	}
	posts, checks := f.state()
	if posts != 4 {
		t.Errorf("Patchwork got %d checks, want 4 (pending and warning on 2 patches)", posts)
	}
	for pid := int64(1); pid <= 2; pid++ {
		cs := checks[pid]
		if len(cs) != 2 || cs[0].State != CheckPending || cs[1].State != CheckWarning || cs[1].Description != desc ||
			cs[1].Context != "patcheval-selinux-tax" || cs[1].TargetURL != "http://127.0.0.1/e/1" {
			t.Errorf("patch %d checks: %+v", pid, cs)
		}
	}
	sent, _ := st.Posts(id, store.PostSent, 10)
	if len(sent) != 4 || !strings.HasPrefix(sent[0].RemoteID, f.URL+"/api/1.2/patches/") {
		t.Errorf("sent posts: %d, remote %q", len(sent), sent[0].RemoteID)
	}
}

func TestPatchworkFakeAPIPatchNotYetThereIsRetriedWithBackoff(t *testing.T) {
	f := newFakePatchwork(t, "tok")
	st := openStore(t, filepath.Join(t.TempDir(), "db"))
	id := newEval(t, st)
	c := &clock{t: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)}
	ob := &Outbox{Store: st, Reporters: []Reporter{patchworkFor(t, f, "tok")}, Now: c.now, Backoff: time.Minute}
	ctx := context.Background()
	QueuePatchworkChecks(st, id, "p", []string{"late@x"}, CheckSuccess, "ok", "")
	ob.Flush(ctx)
	ps, _ := st.Posts(id, "", 1)
	if ps[0].Status != store.PostQueued || !strings.Contains(ps[0].LastError, "not (yet) in Patchwork") ||
		!ps[0].NextAttempt.Equal(c.t.Add(time.Minute)) {
		t.Fatalf("after a miss: %+v", ps[0])
	}
	// Not due yet: nothing is tried.
	c.t = c.t.Add(30 * time.Second)
	ob.Flush(ctx)
	if ps, _ = st.Posts(id, "", 1); ps[0].Attempts != 1 {
		t.Fatalf("tried before its time: %+v", ps[0])
	}
	// Second miss doubles the delay.
	c.t = c.t.Add(31 * time.Second)
	ob.Flush(ctx)
	if ps, _ = st.Posts(id, "", 1); ps[0].Attempts != 2 || !ps[0].NextAttempt.Equal(c.t.Add(2*time.Minute)) {
		t.Fatalf("second miss: %+v", ps[0])
	}
	f.add("late@x", 7)
	c.t = c.t.Add(2 * time.Minute)
	if n, _ := ob.Flush(ctx); n != 1 {
		t.Fatalf("once the patch is there: sent %d", n)
	}
	if posts, _ := f.state(); posts != 1 {
		t.Errorf("posts %d", posts)
	}
}

func TestPatchworkFakeAPIRefusalsFailForGood(t *testing.T) {
	for _, tc := range []struct {
		name   string
		token  string
		answer int
		state  string
		want   string
	}{
		{"401 bad token", "wrong", 0, CheckSuccess, "401"},
		{"422 unprocessable", "tok", http.StatusUnprocessableEntity, CheckSuccess, "422"},
		{"404 patch gone is retried", "tok", http.StatusNotFound, CheckSuccess, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakePatchwork(t, "tok")
			f.add("m@x", 1)
			f.answer = tc.answer
			st := openStore(t, filepath.Join(t.TempDir(), "db"))
			id := newEval(t, st)
			ob := &Outbox{Store: st, Reporters: []Reporter{patchworkFor(t, f, tc.token)}}
			QueuePatchworkChecks(st, id, "p", []string{"m@x"}, tc.state, "d", "")
			ob.Flush(context.Background())
			ps, _ := st.Posts(id, "", 1)
			if tc.want == "" {
				if ps[0].Status != store.PostQueued || !strings.Contains(ps[0].LastError, "404") {
					t.Fatalf("want a retry: %+v", ps[0])
				}
				return
			}
			if ps[0].Status != store.PostFailed || !strings.Contains(ps[0].LastError, tc.want) {
				t.Fatalf("want failed with %s: %+v", tc.want, ps[0])
			}
			if strings.Contains(ps[0].LastError, "tok") && tc.token == "tok" {
				t.Errorf("the token is in the error: %s", ps[0].LastError)
			}
		})
	}
	// An invalid state never reaches Patchwork.
	st := openStore(t, filepath.Join(t.TempDir(), "db"))
	if _, err := QueuePatchworkChecks(st, 0, "p", []string{"m@x"}, "passed", "d", ""); err == nil {
		t.Error("state passed accepted")
	}
}

// A crash after Patchwork created the check and before the store recorded
// it: the restarted outbox finds the check there and posts nothing twice.
func TestPatchworkFakeAPIRestartAfterPostPostsNothingTwice(t *testing.T) {
	f := newFakePatchwork(t, "tok")
	f.add("m@x", 1)
	path := filepath.Join(t.TempDir(), "db")
	st := openStore(t, path)
	id := newEval(t, st)
	pw := patchworkFor(t, f, "tok")
	ps, err := QueuePatchworkChecks(st, id, "p", []string{"m@x"}, CheckFail, "does not build", "")
	if err != nil {
		t.Fatal(err)
	}
	// What Flush does, cut short after the POST.
	if ok, err := st.MarkPostSending(ps[0].ID, ""); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if _, err := pw.Deliver(context.Background(), ps[0], false); err != nil {
		t.Fatal(err)
	}
	st.Close()

	st2 := openStore(t, path)
	ob := &Outbox{Store: st2, Reporters: []Reporter{pw}}
	if n, err := ob.Flush(context.Background()); n != 0 || err != nil {
		t.Fatalf("flush after restart sent %d (%v)", n, err)
	}
	// And queueing the same result again after the restart: skipped too.
	QueuePatchworkChecks(st2, id, "p", []string{"m@x"}, CheckFail, "does not build", "")
	ob.Flush(context.Background())
	if posts, _ := f.state(); posts != 1 {
		t.Errorf("Patchwork got %d checks, want 1", posts)
	}
	if got := statuses(t, st2); strings.Join(got, " ") != "fail:sent fail:skipped" {
		t.Errorf("posts: %v", got)
	}
}

// Patchwork's throttling (429 with Retry-After, Django REST framework):
// the check waits at least that long, then goes out once.
func TestPatchworkFakeAPIThrottledWaitsForRetryAfter(t *testing.T) {
	f := newFakePatchwork(t, "tok")
	f.add("m@x", 1)
	f.answer = http.StatusTooManyRequests
	st := openStore(t, filepath.Join(t.TempDir(), "db"))
	id := newEval(t, st)
	c := &clock{t: time.Now()}
	ob := &Outbox{Store: st, Reporters: []Reporter{patchworkFor(t, f, "tok")}, Now: c.now, Backoff: time.Second}
	QueuePatchworkChecks(st, id, "p", []string{"m@x"}, CheckSuccess, "ok", "")
	ob.Flush(context.Background())
	ps, _ := st.Posts(id, "", 1)
	if ps[0].Status != store.PostQueued || !strings.Contains(ps[0].LastError, "429") || ps[0].NextAttempt.Sub(c.t) < 110*time.Second {
		t.Fatalf("throttled: %+v, want queued until Retry-After (120 s)", ps[0])
	}
	f.mu.Lock()
	f.answer = 0
	f.mu.Unlock()
	c.t = c.t.Add(time.Minute)
	if n, _ := ob.Flush(context.Background()); n != 0 {
		t.Fatalf("sent %d before Retry-After", n)
	}
	c.t = c.t.Add(2 * time.Minute)
	if n, _ := ob.Flush(context.Background()); n != 1 {
		t.Fatalf("after Retry-After: sent %d", n)
	}
	if posts, _ := f.state(); posts != 1 {
		t.Errorf("Patchwork got %d checks", posts)
	}
}

// Posts of a reporter no longer configured (a list renamed or removed)
// stay queued, and more of them than one flush takes do not hold back
// the configured reporters' posts.
func TestPatchworkFakeAPIOrphanPostsDoNotBlockTheOutbox(t *testing.T) {
	f := newFakePatchwork(t, "tok")
	f.add("m@x", 1)
	st := openStore(t, filepath.Join(t.TempDir(), "db"))
	id := newEval(t, st)
	for i := 0; i < 201; i++ {
		if _, err := Enqueue(st, "patchwork/gone", fmt.Sprintf("old%d@x patcheval-p", i), id, CheckSuccess, PatchworkCheck{MsgID: "old@x"}, false); err != nil {
			t.Fatal(err)
		}
	}
	QueuePatchworkChecks(st, id, "p", []string{"m@x"}, CheckSuccess, "ok", "")
	if n, err := (&Outbox{Store: st, Reporters: []Reporter{patchworkFor(t, f, "tok")}}).Flush(context.Background()); n != 1 || err != nil {
		t.Fatalf("flush sent %d (%v), want the configured reporter's 1", n, err)
	}
	if q, _ := st.Posts(id, store.PostQueued, 1000); len(q) != 201 {
		t.Errorf("%d orphans queued, want 201", len(q))
	}
}
