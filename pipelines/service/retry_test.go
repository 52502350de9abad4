package service

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/patcheval/patcheval/internal/testenv"
	"github.com/patcheval/patcheval/internal/testinbox"
)

// TestRetriedStageDoesNotFlickerFailed runs the real chain with a cache
// directory that is a file: every build job fails with an infrastructure
// error, which River retries (attempts 2 and 3, a second and some
// sixteen seconds later). While attempts remain, the evaluation stays
// running (it used to read "failed" between two attempts, then "running"
// again); when the last attempt fails it is failed, once.
func TestRetriedStageDoesNotFlickerFailed(t *testing.T) {
	repo := testenv.LinuxTree(t)
	inbox := testinbox.Start(t, backport)
	notDir := filepath.Join(t.TempDir(), "cache-is-a-file")
	if err := os.WriteFile(notDir, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	logw := &lockedBuffer{}
	s, base := testService(t, Config{AllowTrees: []string{repo}, Lore: inbox.URL, CacheDir: notDir, Jobs: 1, Log: io.MultiWriter(testWriter{t}, logw)})
	req := SubmitRequest{MsgID: "20261102093000.4121-0-tester@example.org", Pipeline: "ppc-preempt-dynamic", Tree: repo, Boots: 1}
	code, _, raw := call(t, "POST", base+"/api/v1/evaluations", "", req)
	if code != 201 {
		t.Fatalf("submit: %d %s", code, raw)
	}
	var sub SubmitResponse
	json.Unmarshal(raw, &sub)
	id := sub.Evaluation.ID
	var seen []string
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		e, err := s.Store().Evaluation(id)
		if err != nil {
			t.Fatal(err)
		}
		if len(seen) == 0 || seen[len(seen)-1] != e.Status {
			seen = append(seen, e.Status)
		}
		if e.Status == "failed" {
			if js, err := s.Engine().Jobs(t.Context(), id, 100, unfinished...); err == nil && len(js) == 0 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the evaluation did not fail; statuses %v", seen)
		}
	}
	if !strings.Contains(logw.String(), "attempt 2 of 3 failed, will retry") {
		t.Fatalf("no build was retried twice:\n%s", logw.String())
	}
	for i, st := range seen[:len(seen)-1] {
		if st == "failed" {
			t.Errorf("statuses %v: failed at %d, then %s again while River retried", seen, i, seen[i+1])
		}
	}
	if seen[len(seen)-1] != "failed" {
		t.Errorf("statuses %v, want failed at the end", seen)
	}
}

// lockedBuffer is a log the service writes from several goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
