package service

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// stalledPost opens a connection to base and sends a submission's headers
// and the start of its body, then stalls (the slow-client probe of issue
// 35).
func stalledPost(t *testing.T, base string) net.Conn {
	t.Helper()
	u, _ := url.Parse(base)
	c, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "POST /api/v1/evaluations HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"msgid\": ", u.Host)
	return c
}

// closedWithin waits until the server closes c (a read returns EOF or an
// error other than our own deadline) and reports whether it did in d.
func closedWithin(c net.Conn, d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	return !errors.Is(err, os.ErrDeadlineExceeded)
}

// TestStalledBodiesClosed: 40 connections that stop mid-body are all
// closed by the server once the read timeout passes; a kept-alive
// connection left idle is closed after the idle timeout; an event stream
// outlives the read timeout (it is lifted once the request is read).
func TestStalledBodiesClosed(t *testing.T) {
	const tok = "0123456789abcdef-test-token"
	to := Timeouts{Read: 400 * time.Millisecond, Idle: 400 * time.Millisecond}
	s, base := testService(t, Config{Token: []byte(tok), Timeouts: to, MaxSubmissions: -1})
	var conns []net.Conn
	for i := 0; i < 40; i++ {
		conns = append(conns, stalledPost(t, base))
	}
	var wg sync.WaitGroup
	open := make(chan int, len(conns))
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !closedWithin(c, 5*time.Second) {
				open <- i
			}
		}()
	}
	wg.Wait()
	close(open)
	if n := len(open); n > 0 {
		t.Errorf("%d of %d connections stalled mid-body are still open 5 s after a %s read timeout", n, len(conns), to.Read)
	}

	u, _ := url.Parse(base)
	c, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /api/v1/jobs HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n\r\n", u.Host, tok)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("keep-alive GET: %v %v", resp, err)
	}
	if !closedWithin(c, 5*time.Second) {
		t.Errorf("an idle kept-alive connection is still open 5 s after a %s idle timeout", to.Idle)
	}

	id := recordEvaluations(t, s, 1, 1)[0]
	req, _ := http.NewRequestWithContext(t.Context(), "GET", fmt.Sprintf("%s/api/v1/evaluations/%d/events", base, id), nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	ev, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Body.Close()
	time.Sleep(3 * to.Read)
	s.evalLog(id).printf("still streaming")
	got := make(chan string, 1)
	go func() {
		b := make([]byte, 4096)
		var all strings.Builder
		for !strings.Contains(all.String(), "still streaming") {
			n, err := ev.Body.Read(b)
			all.Write(b[:n])
			if err != nil {
				break
			}
		}
		got <- all.String()
	}()
	select {
	case out := <-got:
		if !strings.Contains(out, "still streaming") {
			t.Errorf("the event stream ended after the read timeout: %q", out)
		}
	case <-time.After(5 * time.Second):
		t.Errorf("no event 5 s after the line was logged")
	}
}

// TestSubmissionsPerClient: with two submissions of a client under way
// (stalled mid-body), its third gets 429 with Retry-After; once one ends
// the next is taken again.
func TestSubmissionsPerClient(t *testing.T) {
	_, base := testService(t, Config{MaxSubmissions: 2, Timeouts: Timeouts{Read: 30 * time.Second}})
	a, b := stalledPost(t, base), stalledPost(t, base)
	_ = b
	body := SubmitRequest{MsgID: "a@b", Pipeline: "nope"}
	var code int
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if code, _, _ = call(t, "POST", base+"/api/v1/evaluations", "", body); code == http.StatusTooManyRequests {
			break
		}
	}
	if code != http.StatusTooManyRequests {
		t.Fatalf("third submission with two under way: %d, want 429", code)
	}
	if code, _, _ := call(t, "GET", base+"/api/v1/evaluations", "", nil); code != 200 {
		t.Errorf("a read beside the submissions: %d, want 200", code)
	}
	a.Close()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if code, _, _ = call(t, "POST", base+"/api/v1/evaluations", "", body); code != http.StatusTooManyRequests {
			break
		}
	}
	if code != http.StatusBadRequest {
		t.Errorf("a submission once one ended: %d, want 400 (its pipeline is unknown)", code)
	}
}
