package service

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/pipelines/store"
)

// hostReq sends method path to base with the Host and Origin given (the
// browser's headers under DNS rebinding: both name the attacker's host)
// and returns the status code and body; redirects are not followed.
func hostReq(t *testing.T, base, method, path, host, origin string) (int, string) {
	t.Helper()
	var body io.Reader
	if method == "POST" {
		body = strings.NewReader("")
	}
	req, err := http.NewRequest(method, base+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	if origin != "" {
		req.Header.Set("Origin", origin)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestHostAllowListRebinding replays the DNS-rebinding probe of issue 35
// on a real serve (loopback, no token): requests whose Host and Origin
// both name rebind.attacker.example:PORT are refused with 421 before any
// handler runs (the rerun is not queued, the post not approved, no page
// is read), while the same requests addressed to 127.0.0.1, localhost or
// [::1] with the port, and to --public-url's host, still work.
func TestHostAllowListRebinding(t *testing.T) {
	ap := &approvals{}
	s, base := testService(t, Config{Posts: ap, PublicURL: "https://patcheval.example.org/", AllowHosts: []string{"farm.lan"}})
	st := s.Store()
	id := recordEvaluations(t, s, 1, 1)[0]
	if err := st.Tx(t.Context(), func(tx *store.Tx) error { return st.SetInputsTx(tx, id, []byte("{}"), nil) }); err != nil {
		t.Fatal(err)
	}
	post, err := st.EnqueuePost(store.Post{Reporter: "mail/ppc", Target: "t1", EvaluationID: id, Digest: "d1", Payload: "{}"}, true)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(base)
	port := u.Port()
	evil := "rebind.attacker.example:" + port
	rerun := fmt.Sprintf("/evaluations/%d/rerun", id)
	approve := fmt.Sprintf("/posts/%d/approve", post.ID)
	for _, c := range []struct{ method, path string }{
		{"POST", rerun}, {"POST", approve}, {"GET", "/"}, {"GET", fmt.Sprintf("/evaluations/%d", id)},
		{"GET", "/api/v1/evaluations"}, {"POST", "/api/v1/evaluations"}, {"GET", "/riverui/"},
	} {
		code, body := hostReq(t, base, c.method, c.path, evil, "http://"+evil)
		var e APIError
		_ = json.Unmarshal([]byte(body), &e)
		if code != http.StatusMisdirectedRequest || e.Field != "Host" || !strings.Contains(e.Error, "rebind.attacker.example") || strings.Contains(e.Error, "\n") {
			t.Errorf("%s %s with Host %s: %d %q, want 421 naming the host in one line", c.method, c.path, evil, code, body)
		}
	}
	for _, h := range []string{"rebind.attacker.example", "127.0.0.1.nip.io:" + port, "patcheval.example.org:" + port, "localhost:1"} {
		if code, _ := hostReq(t, base, "GET", "/", h, ""); code != http.StatusMisdirectedRequest {
			t.Errorf("GET / with Host %s: %d, want 421", h, code)
		}
	}
	if e, err := st.Evaluation(id); err != nil || e.Status == StatusQueued {
		t.Fatalf("the rebinding rerun was queued: %+v %v", e, err)
	}
	if len(ap.ids) != 0 {
		t.Fatalf("the rebinding approve reached the outbox: %v", ap.ids)
	}

	for _, h := range []string{u.Host, "localhost:" + port, "LocalHost.:" + port, "[::1]:" + port, "patcheval.example.org", "farm.lan:" + port} {
		if code, body := hostReq(t, base, "GET", "/", h, ""); code != 200 {
			t.Errorf("GET / with Host %s: %d %.200s, want 200", h, code, body)
		}
	}
	if code, body := hostReq(t, base, "POST", approve, "localhost:"+port, "http://localhost:"+port); code != http.StatusSeeOther || len(ap.ids) != 1 {
		t.Errorf("approve from localhost: %d %.200s, approved %v; want 303 and one approval", code, body, ap.ids)
	}
	if code, body := hostReq(t, base, "POST", rerun, u.Host, base); code != http.StatusSeeOther {
		t.Errorf("rerun from %s: %d %.200s, want 303", u.Host, code, body)
	}
	if e, err := st.Evaluation(id); err != nil || e.Status == "done" {
		t.Errorf("the legitimate rerun did not queue the evaluation: %+v %v", e, err)
	}
}
