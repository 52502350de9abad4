package service

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// lineLog keeps serve's log lines for a test and passes them to t.Log.
type lineLog struct {
	t  testing.TB
	mu sync.Mutex
	b  strings.Builder
}

func (l *lineLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	l.b.Write(p)
	l.mu.Unlock()
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func (l *lineLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A client that leaves while serve parses, threads and resolves its large
// mbox (a 100k-message reply chain, 9 MB) stops that work: serve logs
// that the work stopped part-way, within seconds of the client leaving
// (it used to go on for the whole parse and resolve; issue 35 saw an
// 11 MB submission keep serve busy ~30 minutes).
func TestSubmitStopsWhenClientLeaves(t *testing.T) {
	root := t.TempDir()
	tree := gitRepo(t, filepath.Join(root, "linux"))
	log := &lineLog{t: t}
	_, base := testService(t, Config{AllowTrees: []string{root}, Log: log})
	var mb bytes.Buffer
	for i := 0; i < 100000; i++ {
		subj := "Re: [PATCH] gen: change"
		if i == 0 {
			subj = "[PATCH] gen: change"
		}
		fmt.Fprintf(&mb, "From mboxrd@z Thu Jan  1 00:00:00 1970\nFrom: A <a@example.org>\nSubject: %s\nDate: Mon, 5 Jan 2026 %02d:%02d:%02d +0000\nMessage-ID: <c%d@example.org>\n", subj, (i/3600)%24, (i/60)%60, i%60, i)
		if i > 0 {
			fmt.Fprintf(&mb, "In-Reply-To: <c%d@example.org>\n", i-1)
			mb.WriteString("\nFine.\n\nReviewed-by: A <a@example.org>\n\n")
		} else {
			mb.WriteString("\nChange.\n\nSigned-off-by: A <a@example.org>\n---\ndiff --git a/f.c b/f.c\n--- a/f.c\n+++ b/f.c\n@@ -1 +1 @@\n-a\n+b\n\n")
		}
	}
	body, _ := json.Marshal(SubmitRequest{Mbox: mb.String(), Pipeline: "ppc-preempt-dynamic", Tree: tree, Base: "HEAD"})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", base+"/api/v1/evaluations", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	done := make(chan struct{})
	go func() {
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			t.Errorf("the submission was answered %s before the client left", resp.Status)
		}
		close(done)
	}()
	// Leave once serve has the whole body and is at work on it.
	time.Sleep(2500 * time.Millisecond)
	cancel()
	left := time.Now()
	<-done
	for !strings.Contains(log.String(), "the client left") {
		if time.Since(left) > 15*time.Second {
			t.Fatalf("serve still at work %s after the client left (no 'client left' line)", time.Since(left).Round(time.Second))
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("serve stopped %s after the client left", time.Since(left).Round(time.Millisecond))
	// Parsing and resolving say "stopped after N of M", threading
	// "stopped while <step> (N of M messages)": which one the client's
	// leaving meets depends on the machine's speed.
	if l := log.String(); !(strings.Contains(l, "stopped after") || strings.Contains(l, "stopped while")) || !strings.Contains(l, "context canceled") {
		t.Errorf("the log does not say the work stopped part-way:\n%s", l)
	}
}
