package service

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Timeouts bound how long a client may hold a connection without making
// progress (issue 35: 300 connections stalled mid-body stayed open
// indefinitely). Zero fields take DefaultTimeouts'.
type Timeouts struct {
	// ReadHeader bounds reading a request's headers.
	ReadHeader time.Duration
	// Read bounds reading a whole request, headers and body, counted
	// from its first byte. Once the body is read the deadline is lifted,
	// so a long handler (a submission fetching its thread) or an event
	// stream is not cut off by it.
	Read time.Duration
	// Write bounds each write of a response: a client that stops reading
	// for that long is dropped; one that reads keeps a stream going.
	Write time.Duration
	// Idle bounds how long a kept-alive connection waits for its next
	// request.
	Idle time.Duration
	// Bulk replaces Read for the farm's bulk transfers (artifact uploads
	// with the token, git fetches of a tree).
	Bulk time.Duration
}

// DefaultTimeouts are serve's timeouts.
var DefaultTimeouts = Timeouts{ReadHeader: 10 * time.Second, Read: time.Minute, Write: time.Minute, Idle: 2 * time.Minute, Bulk: 30 * time.Minute}

func (t Timeouts) withDefaults() Timeouts {
	d := DefaultTimeouts
	for _, f := range []struct{ v, def *time.Duration }{{&t.ReadHeader, &d.ReadHeader}, {&t.Read, &d.Read}, {&t.Write, &d.Write}, {&t.Idle, &d.Idle}, {&t.Bulk, &d.Bulk}} {
		if *f.v <= 0 {
			*f.v = *f.def
		}
	}
	return t
}

// DefaultMaxSubmissions is how many submissions one client (one remote
// address) may have in flight at once: more get 429.
const DefaultMaxSubmissions = 4

// httpServer is serve's HTTP server on h with the service's timeouts.
func (s *Service) httpServer(h http.Handler) *http.Server {
	t := s.cfg.Timeouts.withDefaults()
	return &http.Server{Handler: s.deadlines(h, t), ReadHeaderTimeout: t.ReadHeader, ReadTimeout: t.Read, IdleTimeout: t.Idle}
}

// deadlines applies Timeouts to one request: the read deadline (set by
// the server from ReadTimeout) stays until the body is read, then is
// lifted; bulk transfers get Bulk instead; every write of the response
// must finish within Write.
func (s *Service) deadlines(h http.Handler, t Timeouts) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if bulk(r) && (r.Method == http.MethodGet || s.authorized(r)) {
			rc.SetReadDeadline(time.Now().Add(t.Bulk))
		}
		if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
			rc.SetReadDeadline(time.Time{})
		} else {
			r.Body = &liftOnEOF{ReadCloser: r.Body, lift: func() { rc.SetReadDeadline(time.Time{}) }}
		}
		rc.SetWriteDeadline(time.Time{})
		h.ServeHTTP(&writeDeadline{ResponseWriter: w, rc: rc, d: t.Write}, r)
	})
}

func bulk(r *http.Request) bool {
	return strings.HasPrefix(r.URL.Path, ArtifactsPath) || strings.HasPrefix(r.URL.Path, GitPath)
}

// liftOnEOF lifts the read deadline once the body has been read whole.
type liftOnEOF struct {
	io.ReadCloser
	lift func()
	once sync.Once
}

func (b *liftOnEOF) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.once.Do(b.lift)
	}
	return n, err
}

// writeDeadline gives each write of a response d to finish.
type writeDeadline struct {
	http.ResponseWriter
	rc *http.ResponseController
	d  time.Duration
}

func (w *writeDeadline) Write(p []byte) (int, error) {
	w.rc.SetWriteDeadline(time.Now().Add(w.d))
	return w.ResponseWriter.Write(p)
}

func (w *writeDeadline) Flush() {
	w.rc.SetWriteDeadline(time.Now().Add(w.d))
	w.rc.Flush()
}

// Unwrap lets http.ResponseController reach the connection.
func (w *writeDeadline) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// inflight counts each client's submissions under way.
type inflight struct {
	mu  sync.Mutex
	max int
	n   map[string]int
}

// limitSubmissions refuses a client's submission with 429 while it has
// max others under way (a submission fetches and threads a whole thread:
// one client must not hold every worker goroutine and the CPU).
func (s *Service) limitSubmissions(h http.HandlerFunc) http.HandlerFunc {
	lim := &inflight{max: s.cfg.MaxSubmissions, n: map[string]int{}}
	if lim.max == 0 {
		lim.max = DefaultMaxSubmissions
	}
	return func(w http.ResponseWriter, r *http.Request) {
		client, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			client = r.RemoteAddr
		}
		lim.mu.Lock()
		if lim.max > 0 && lim.n[client] >= lim.max {
			lim.mu.Unlock()
			w.Header().Set("Retry-After", "10")
			apiError(w, http.StatusTooManyRequests, "", fmt.Sprintf("%d submissions from %s are already under way: wait for one to finish", lim.max, client))
			return
		}
		lim.n[client]++
		lim.mu.Unlock()
		defer func() {
			lim.mu.Lock()
			if lim.n[client]--; lim.n[client] <= 0 {
				delete(lim.n, client)
			}
			lim.mu.Unlock()
		}()
		h(w, r)
	}
}
