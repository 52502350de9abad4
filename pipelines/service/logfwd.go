package service

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// A worker's progress lines (its builds' and boots') reach serve's live
// log of the evaluation (the evaluation page and its events), prefixed
// with the worker's name: the worker POSTs them in batches to
// LogPath, with the token. Forwarding is best-effort: a line that cannot
// be sent (serve down, a full queue) stays in the worker's own log only,
// and a job never waits for it.

// LogLines is the body of POST /api/v1/evaluations/{id}/log.
type LogLines struct {
	Worker string   `json:"worker"`
	Lines  []string `json:"lines"`
}

// maxLogLines and maxLogLine bound one POST of LogLines.
const (
	maxLogLines = 1000
	maxLogLine  = 4096
)

// apiLog takes a worker's progress lines into evaluation id's live log.
// Only a worker may write there: the request must carry the token, also
// on loopback, where every other endpoint is open without one (a serve
// without --token-file has no workers that could forward lines). The
// lines are escaped like every log line (evalLog.add).
func (s *Service) apiLog(w http.ResponseWriter, r *http.Request) {
	if len(s.cfg.Token) == 0 || !s.authorized(r) {
		apiError(w, http.StatusForbidden, "Authorization",
			"the worker log endpoint takes lines only from workers: serve needs --token-file and the request the token")
		return
	}
	e, ok := s.evalOf(w, r)
	if !ok {
		return
	}
	var in LogLines
	if err := json.NewDecoder(io.LimitReader(r.Body, maxLogLines*(maxLogLine+8)+4096)).Decode(&in); err != nil {
		apiError(w, http.StatusBadRequest, "", fmt.Sprintf("log lines: %v", err))
		return
	}
	if in.Worker == "" || len(in.Lines) > maxLogLines {
		apiError(w, http.StatusBadRequest, "lines", fmt.Sprintf("want a worker name and at most %d lines", maxLogLines))
		return
	}
	l := s.evalLog(e.ID)
	l.mu.Lock()
	for _, line := range in.Lines {
		if len(line) > maxLogLine {
			line = line[:maxLogLine]
		}
		l.add(in.Worker + ": " + line)
	}
	l.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// logForwarder sends a worker's progress lines to serve.
type logForwarder struct {
	url    string // serve's base URL, no trailing /
	token  []byte
	worker string
	logf   func(format string, a ...any)

	in   chan logLine
	done chan struct{}
	once sync.Once
}

type logLine struct {
	id   int64
	line string
}

func newLogForwarder(server string, token []byte, worker string, logf func(string, ...any)) *logForwarder {
	f := &logForwarder{url: server, token: token, worker: worker, logf: logf, in: make(chan logLine, 4*maxLogLines), done: make(chan struct{})}
	go f.run()
	return f
}

// send queues a line of evaluation id (dropped when the queue is full).
func (f *logForwarder) send(id int64, line string) {
	select {
	case f.in <- logLine{id, line}:
	default:
	}
}

// close sends what is queued and stops.
func (f *logForwarder) close() {
	f.once.Do(func() { close(f.in) })
	<-f.done
}

func (f *logForwarder) run() {
	defer close(f.done)
	batch := map[int64][]string{}
	n := 0
	t := time.NewTicker(300 * time.Millisecond)
	defer t.Stop()
	failing := false
	flush := func() {
		for id, lines := range batch {
			err := f.post(id, lines)
			if err != nil && !failing {
				f.logf("worker %s: progress lines to %s: %v (they stay in this log)", f.worker, f.url, err)
			}
			failing = err != nil
		}
		clear(batch)
		n = 0
	}
	for {
		select {
		case l, ok := <-f.in:
			if !ok {
				flush()
				return
			}
			batch[l.id] = append(batch[l.id], l.line)
			if n++; n >= maxLogLines {
				flush()
			}
		case <-t.C:
			flush()
		}
	}
}

func (f *logForwarder) post(id int64, lines []string) error {
	body, _ := json.Marshal(LogLines{Worker: f.worker, Lines: lines})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("%s/api/v1/evaluations/%d/log", f.url, id), bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+string(f.token))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(b))
	}
	return nil
}
