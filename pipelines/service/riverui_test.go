package service

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/riverqueue/river"

	"github.com/patcheval/patcheval/pipelines/store"
)

// TestRiverUI reads River's jobs and queues through riverui mounted
// under /riverui on a real serve (SQLite): without a token it is
// read-only (a queue pause is refused and nothing changes); with
// --token-file its reads need the token like the dashboard's, and a
// pause sent with the token pauses the queue.
func TestRiverUI(t *testing.T) {
	s, base := testService(t, Config{})
	// A job of the service's own kinds: a notify job (no Notify
	// configured, so it completes at once).
	var id int64
	err := s.db.Store.Tx(context.Background(), func(tx *store.Tx) error {
		var err error
		id, err = s.engine.insertTx(context.Background(), tx, river.InsertManyParams{Args: NotifyArgs{EvaluationID: 7, Gen: 1, Event: EventDone},
			InsertOpts: &river.InsertOpts{Queue: QueueReport}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	code, _, body := call(t, "GET", base+RiverUIPath+"/", "", nil)
	if code != 200 || !strings.Contains(string(body), "<title>River</title>") {
		t.Fatalf("GET %s/: %d, want riverui's page:\n%.300s", RiverUIPath, code, body)
	}
	code, _, body = call(t, "GET", fmt.Sprintf("%s%s/api/jobs/%d", base, RiverUIPath, id), "", nil)
	var job struct {
		Kind  string `json:"kind"`
		Queue string `json:"queue"`
	}
	if err := json.Unmarshal(body, &job); code != 200 || err != nil || job.Kind != "notify" || job.Queue != QueueReport {
		t.Errorf("riverui job %d: %d %s, want the notify job in queue %s", id, code, body, QueueReport)
	}
	paused := func(base, token string) bool {
		t.Helper()
		code, _, body := call(t, "GET", base+RiverUIPath+"/api/queues/"+QueueApply, token, nil)
		var q struct {
			Name     string  `json:"name"`
			PausedAt *string `json:"paused_at"`
		}
		if err := json.Unmarshal(body, &q); code != 200 || err != nil || q.Name != QueueApply {
			t.Fatalf("riverui queue %s: %d %s", QueueApply, code, body)
		}
		return q.PausedAt != nil
	}
	code, e, _ := call(t, "PUT", base+RiverUIPath+"/api/queues/"+QueueApply+"/pause", "", "{}")
	if code != 403 || e.Field != "Authorization" {
		t.Errorf("riverui pause without a token: %d %+v, want 403 naming Authorization", code, e)
	}
	if paused(base, "") {
		t.Errorf("queue %s was paused through riverui without a token", QueueApply)
	}

	const token = "riverui-test-token-0123456789"
	_, tbase := testService(t, Config{Token: []byte(token)})
	if code, _, _ := call(t, "GET", tbase+RiverUIPath+"/api/queues", "", nil); code != 401 {
		t.Errorf("riverui read without the token on a service that has one: %d, want 401", code)
	}
	if code, _, _ := call(t, "PUT", tbase+RiverUIPath+"/api/queues/"+QueueApply+"/pause", "wrong-token-0123456789", "{}"); code != 401 {
		t.Errorf("riverui pause with a wrong token: %d, want 401", code)
	}
	if paused(tbase, token) {
		t.Fatalf("queue %s paused before the pause", QueueApply)
	}
	if code, _, body := call(t, "PUT", tbase+RiverUIPath+"/api/queues/"+QueueApply+"/pause", token, "{}"); code != 200 {
		t.Errorf("riverui pause with the token: %d %s, want 200", code, body)
	}
	if !paused(tbase, token) {
		t.Errorf("queue %s is not paused after riverui paused it with the token", QueueApply)
	}
}
