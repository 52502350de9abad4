package service

import (
	"bufio"
	"bytes"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuf is a log the test reads while the service writes it.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestWorkerLogNeedsToken: on a loopback serve without --token-file,
// where the other endpoints are open, POST .../log is refused (403) and
// nothing reaches the evaluation's log; with a token it needs the token.
func TestWorkerLogNeedsToken(t *testing.T) {
	s, open := testService(t, Config{})
	id := recordEvaluations(t, s, 1, 1)[0]
	code, e, _ := call(t, "POST", fmt.Sprintf("%s/api/v1/evaluations/%d/log", open, id), "", LogLines{Worker: "w", Lines: []string{"forged"}})
	if code != http.StatusForbidden || e.Field != "Authorization" || strings.Contains(strings.Join(s.evalLog(id).snapshot(), "\n"), "forged") {
		t.Errorf("log without a token on a token-less loopback serve: %d %+v, want 403 naming Authorization", code, e)
	}
	const tok = "0123456789abcdef-test-token"
	_, base := testService(t, Config{Token: []byte(tok)})
	if code, _, _ := call(t, "POST", base+"/api/v1/evaluations/1/log", "", LogLines{Worker: "w", Lines: []string{"forged"}}); code != http.StatusUnauthorized {
		t.Errorf("log without the token: %d, want 401", code)
	}
}

// TestLogControlCharacters: a worker's lines holding ESC/OSC sequences,
// CRs (one that would start a forged "event:" field), C1 controls and a
// newline reach serve's stderr log and the evaluation's event stream
// escaped: no raw control byte in the log, and a browser-style parse of
// the stream (lines end in \r\n, \r or \n) finds no event but "status".
func TestLogControlCharacters(t *testing.T) {
	const tok = "0123456789abcdef-test-token"
	log := &syncBuf{}
	s, base := testService(t, Config{Token: []byte(tok), Log: log})
	id := recordEvaluations(t, s, 1, 1)[0]

	req, _ := http.NewRequestWithContext(t.Context(), "GET", fmt.Sprintf("%s/api/v1/evaluations/%d/events", base, id), nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	if l, err := rd.ReadString('\n'); err != nil || l != "event: status\n" {
		t.Fatalf("first event line %q %v", l, err)
	}
	hostile := []string{
		"\x1b]0;pwned\x07\x1b[2Jcleared",
		"ok\revent: evil\rdata: forged",
		"line\r\nevent: evil2",
		"multi\nline",
		"c1 \u009b31m red",
	}
	if code, _, raw := call(t, "POST", fmt.Sprintf("%s/api/v1/evaluations/%d/log", base, id), tok, LogLines{Worker: "w\x1b[1m", Lines: hostile}); code != http.StatusNoContent {
		t.Fatalf("log with the token: %d %s", code, raw)
	}
	var stream strings.Builder
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(stream.String(), "data: ") < 1+len(hostile) && time.Now().Before(deadline) {
		b := make([]byte, 4096)
		n, err := rd.Read(b)
		stream.Write(b[:n])
		if err != nil {
			break
		}
	}
	fields := regexp.MustCompile(`\r\n|\r|\n`).Split(stream.String(), -1)
	for _, f := range fields {
		if strings.HasPrefix(f, "event:") && f != "event: status" {
			t.Errorf("the stream has a forged field %q:\n%q", f, stream.String())
		}
		if strings.ContainsAny(f, "\x1b\x07\u009b") {
			t.Errorf("the stream has a raw control character in %q", f)
		}
	}
	if !strings.Contains(stream.String(), `data: w\x1b[1m: ok\revent: evil\rdata: forged`) {
		t.Errorf("the escaped line is missing from the stream:\n%q", stream.String())
	}
	out := log.String()
	for _, bad := range []string{"\x1b", "\r", "\x07", "\u009b", "\nline"} {
		if strings.Contains(out, bad) {
			t.Errorf("serve's log holds %q:\n%q", bad, out)
		}
	}
	if !strings.Contains(out, `w\x1b[1m: \x1b]0;pwned\x07\x1b[2Jcleared`) {
		t.Errorf("serve's log lacks the escaped line:\n%q", out)
	}
}

// TestLogsNoSniff: a boot's console (text a guest and a series control)
// is served as text/plain; charset=utf-8 with nosniff, so that a browser
// never renders it as HTML.
func TestLogsNoSniff(t *testing.T) {
	s, base := testService(t, Config{})
	id := recordEvaluations(t, s, 1, 1)[0]
	runs, err := s.Store().RunsOf(id)
	if err != nil || len(runs) == 0 {
		t.Fatal(runs, err)
	}
	resp, err := http.Get(fmt.Sprintf("%s/evaluations/%d/runs/%d/console", base, id, runs[0].ID))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("console: %d %q nosniff=%q", resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("X-Content-Type-Options"))
	}
}
