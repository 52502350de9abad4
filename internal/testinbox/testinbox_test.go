package testinbox

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const (
	fixtures = "../../mbox/testdata/threads/"
	v4Patch  = "20250210194600.322cfa9d-1-sshegde@linux.ibm.com"
	backport = "20261102093000.4121-1-tester@example.org"
	followup = "20260731102000.ab50c836-0-jhladky@redhat.com"
)

var noRedirect = &http.Client{
	Timeout:       10 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

func get(t *testing.T, u string) (int, string, []byte) {
	t.Helper()
	resp, err := noRedirect.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Location"), b
}

func threadCount(t *testing.T, u string) int {
	t.Helper()
	code, _, body := get(t, u)
	if code != 200 {
		t.Fatalf("GET %s: %d", u, code)
	}
	zr, err := gzip.NewReader(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("%s: %v", u, err)
	}
	mb, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("%s: %v", u, err)
	}
	return bytes.Count(mb, []byte("From mboxrd@z Thu Jan  1 00:00:00 1970\n"))
}

func TestServerAll(t *testing.T) {
	start := time.Now()
	s := Start(t, fixtures+"ppc-dynamic-preempt-v4.mbox", fixtures+"ppc-dynamic-preempt-v6.1-backport.mbox")
	t.Logf("started %s with 20 messages in %s", s.URL, time.Since(start).Round(time.Millisecond))
	if !strings.HasPrefix(s.URL, "http://127.0.0.1:") || s.Inbox != "test" {
		t.Fatalf("URL %q inbox %q", s.URL, s.Inbox)
	}
	esc := strings.ReplaceAll(v4Patch, "@", "%40")
	if n := threadCount(t, s.URL+"/all/"+esc+"/t.mbox.gz"); n != 18 {
		t.Errorf("/all/ thread has %d messages, want 18", n)
	}
	if n := threadCount(t, s.URL+"/test/"+esc+"/t.mbox.gz"); n != 18 {
		t.Errorf("/test/ thread has %d messages, want 18", n)
	}
	if n := threadCount(t, s.ThreadURL(backport)); n != 2 {
		t.Errorf("backport thread has %d messages, want 2", n)
	}
	code, loc, _ := get(t, s.URL+"/"+v4Patch+"/")
	if code != 302 || loc != s.URL+"/all/"+v4Patch+"/" {
		t.Errorf("/<msgid>/: %d %q", code, loc)
	}
	if code, _, _ := get(t, s.URL+"/all/nobody%40nowhere/t.mbox.gz"); code != 404 {
		t.Errorf("unknown msgid: %d", code)
	}

	// Add: the follow-up becomes visible without a restart.
	if code, _, _ := get(t, s.ThreadURL(followup)); code != 404 {
		t.Fatalf("follow-up before Add: %d", code)
	}
	s.Add(t, fixtures+"ppc-dynamic-preempt-arm64-followup.mbox")
	if n := threadCount(t, s.URL+"/all/"+strings.ReplaceAll(followup, "@", "%40")+"/t.mbox.gz"); n != 18 {
		t.Errorf("follow-up after Add: %d messages, want 18 (threaded by subject)", n)
	}

	// The b4 recipe of the package doc.
	if _, err := exec.LookPath("b4"); err != nil {
		t.Fatalf("b4 not installed (Debian package b4): %v", err)
	}
	out := t.TempDir()
	cmd := s.B4Command("am", "-o", out, v4Patch)
	cmd.Dir = t.TempDir()
	msg, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("b4 am: %v\n%s", err, msg)
	}
	if !bytes.Contains(msg, []byte("Analyzing 18 messages in the thread")) {
		t.Errorf("b4 did not read the thread from the server:\n%s", msg)
	}
	mbx, _ := filepath.Glob(filepath.Join(out, "*.mbx"))
	if len(mbx) != 1 {
		t.Fatalf("b4 wrote %v\n%s", mbx, msg)
	}
	b, _ := os.ReadFile(mbx[0])
	if !bytes.Contains(b, []byte("Subject: [PATCH v4 1/1] powerpc: enable dynamic preemption")) {
		t.Errorf("b4 am-mbox lacks the patch")
	}
}

func TestServerNoAll(t *testing.T) {
	s := StartWith(t, Options{NoAll: true, Inbox: "linuxppc-dev"}, fixtures+"ppc-dynamic-preempt-v6.1-backport.mbox")
	if code, _, _ := get(t, s.URL+"/all/"+strings.ReplaceAll(backport, "@", "%40")+"/t.mbox.gz"); code != 404 {
		t.Errorf("/all/ without extindex: %d, want 404", code)
	}
	code, loc, _ := get(t, s.URL+"/"+backport+"/")
	if code != 302 || loc != s.URL+"/linuxppc-dev/"+backport+"/" {
		t.Errorf("/<msgid>/: %d %q, want a redirect to the inbox", code, loc)
	}
	if n := threadCount(t, s.ThreadURL(backport)); n != 2 {
		t.Errorf("thread has %d messages", n)
	}
	if code, _, _ := get(t, s.URL+"/nobody@nowhere/"); code != 404 {
		t.Errorf("unknown msgid: %d", code)
	}
}

func TestSplitMbox(t *testing.T) {
	in := "From mboxrd@z Thu Jan  1 00:00:00 1970\r\nSubject: a\r\n\r\n>From x\r\n>>From y\r\n\r\nFrom mboxrd@z Thu Jan  1 00:00:00 1970\nSubject: b\n\nbody\n\n"
	got := SplitMbox([]byte(in))
	if len(got) != 2 || string(got[0]) != "Subject: a\n\nFrom x\n>From y\n" || string(got[1]) != "Subject: b\n\nbody\n" {
		t.Errorf("%q", got)
	}
}

func TestServerBulk(t *testing.T) {
	start := time.Now()
	s := StartWith(t, Options{Bulk: true}, fixtures+"ppc-dynamic-preempt-v4.mbox", fixtures+"ppc-dynamic-preempt-v6.1-backport.mbox")
	t.Logf("bulk: started with 20 messages in %s", time.Since(start).Round(time.Millisecond))
	if n := threadCount(t, s.URL+"/all/"+strings.ReplaceAll(v4Patch, "@", "%40")+"/t.mbox.gz"); n != 18 {
		t.Errorf("/all/ thread has %d messages, want 18", n)
	}
	code, loc, _ := get(t, s.URL+"/"+v4Patch+"/")
	if code != 302 || loc != s.URL+"/all/"+v4Patch+"/" {
		t.Errorf("/<msgid>/: %d %q", code, loc)
	}
	s.Add(t, fixtures+"ppc-dynamic-preempt-arm64-followup.mbox")
	// public-inbox threads the orphan follow-up (its parent is missing)
	// with the v4 thread by subject: the v4 patch's t.mbox.gz has all 19;
	// the follow-up's has the 18 sharing its subject (the cover letter's
	// subject differs).
	if n := threadCount(t, s.ThreadURL(followup)); n != 18 {
		t.Errorf("follow-up after Add: %d messages in its thread, want 18", n)
	}
	if n := threadCount(t, s.ThreadURL(v4Patch)); n != 19 {
		t.Errorf("v4 thread after Add: %d messages, want 19", n)
	}
}
