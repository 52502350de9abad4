package watch

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/robfig/cron/v3"
)

// DefaultSchedule is how often a watch looks at its remote when no
// schedule is given.
const DefaultSchedule = "@every 30m"

// parser is robfig's standard parser: 5 fields (minute hour dom month
// dow) or a descriptor (@hourly, @every 30m). Seconds are not accepted:
// nobody needs to poll a kernel remote every second.
var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ParseSchedule validates a schedule spec and returns robfig's schedule.
// It never panics: robfig/cron v3.0.1 panics on "TZ=UTC" or "CRON_TZ=UTC"
// without fields (it slices up to the first blank), so those are checked
// first, and any other panic inside the parser becomes an error.
func ParseSchedule(spec string) (s cron.Schedule, err error) {
	orig := spec
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return nil, fmt.Errorf("schedule is empty (want 5 cron fields like '0 */6 * * *' or '@every 30m')")
	}
	if strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=") {
		tz, rest, ok := strings.Cut(spec, " ")
		if !ok || strings.TrimSpace(rest) == "" {
			return nil, fmt.Errorf("schedule %q: %s names a time zone but no schedule follows (e.g. '%s 0 3 * * *')", orig, tz, tz)
		}
		if _, name, _ := strings.Cut(tz, "="); name == "" {
			return nil, fmt.Errorf("schedule %q: %s is an empty time zone (e.g. 'CRON_TZ=UTC 0 3 * * *')", orig, tz)
		}
		spec = tz + " " + strings.TrimSpace(rest)
	}
	if body := afterTZ(spec); strings.HasPrefix(body, "@every") {
		d, perr := time.ParseDuration(strings.TrimSpace(strings.TrimPrefix(body, "@every")))
		if perr != nil {
			return nil, fmt.Errorf("schedule %q: @every needs a duration like 30m or 6h: %v", orig, perr)
		}
		if d < time.Minute {
			return nil, fmt.Errorf("schedule %q: @every %s is shorter than a minute (polling a remote that often only loads it)", orig, d)
		}
	}
	defer func() {
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("schedule %q: not a valid cron spec (%v)", orig, r)
		}
	}()
	s, err = parser.Parse(spec)
	if err != nil {
		msg := err.Error()
		if n := len(strings.Fields(afterTZ(spec))); n == 6 && !strings.HasPrefix(afterTZ(spec), "@") {
			msg += " (6 fields: seconds are not supported; use minute hour day-of-month month day-of-week)"
		}
		return nil, fmt.Errorf("schedule %q: %s", orig, msg)
	}
	return s, nil
}

func afterTZ(spec string) string {
	if strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=") {
		_, rest, _ := strings.Cut(spec, " ")
		return strings.TrimSpace(rest)
	}
	return spec
}

// Scheduler runs one function per watch on the watch's schedule, with
// robfig's Recover (a panic in one tick is logged, the scheduler goes on)
// and SkipIfStillRunning (a tick that is still busy when the next one is
// due makes the next one a no-op, so a slow evaluation never piles up).
type Scheduler struct {
	c     *cron.Cron
	mu    sync.Mutex
	ids   map[int64]cron.EntryID
	specs map[int64]string
	log   func(format string, a ...any)
}

// NewScheduler makes a stopped scheduler; logf receives robfig's errors
// (recovered panics, skipped ticks).
func NewScheduler(logf func(format string, a ...any)) *Scheduler {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	l := cronLogger{logf}
	return &Scheduler{
		c: cron.New(cron.WithParser(parser), cron.WithLogger(l),
			cron.WithChain(cron.Recover(l))),
		ids: map[int64]cron.EntryID{}, specs: map[int64]string{}, log: logf,
	}
}

// Set schedules fn for watch id on spec, replacing an earlier entry when
// the spec changed. Each entry gets its own SkipIfStillRunning.
func (s *Scheduler) Set(id int64, spec string, fn func()) error {
	sched, err := ParseSchedule(spec)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.ids[id]; ok {
		if s.specs[id] == spec {
			return nil
		}
		s.c.Remove(old)
	}
	job := cron.NewChain(cron.SkipIfStillRunning(cronLogger{s.log})).Then(cron.FuncJob(fn))
	s.ids[id] = s.c.Schedule(sched, job)
	s.specs[id] = spec
	return nil
}

// Remove drops watch id's entry.
func (s *Scheduler) Remove(id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.ids[id]; ok {
		s.c.Remove(e)
		delete(s.ids, id)
		delete(s.specs, id)
	}
}

// IDs lists the scheduled watches.
func (s *Scheduler) IDs() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int64
	for id := range s.ids {
		out = append(out, id)
	}
	return out
}

// Next is when watch id runs next (zero when not scheduled or stopped).
func (s *Scheduler) Next(id int64) time.Time {
	s.mu.Lock()
	e, ok := s.ids[id]
	s.mu.Unlock()
	if !ok {
		return time.Time{}
	}
	return s.c.Entry(e).Next
}

// Run starts the scheduler and blocks until ctx ends; running jobs are
// waited for.
func (s *Scheduler) Run(ctx context.Context) {
	s.c.Start()
	<-ctx.Done()
	<-s.c.Stop().Done()
}

type cronLogger struct{ logf func(string, ...any) }

func (l cronLogger) Info(msg string, kv ...any) {
	if msg == "skip" {
		l.logf("watch: a tick was skipped: the previous one is still running")
	}
}

func (l cronLogger) Error(err error, msg string, kv ...any) {
	l.logf("watch: %s: %v %v", msg, err, kv)
}
