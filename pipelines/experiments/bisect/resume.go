package bisect

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/patcheval/patcheval/internal/fail"
)

// Record is one measurement a bisection asked for, as it was recorded:
// a bisection run as queue work (pipelines/service) keeps its records in
// the store, and Resume replays them instead of measuring again.
type Record struct {
	Commit string `json:"commit"`
	Boots  int    `json:"boots"`
	// N is which measurement of Commit this is (0 = the first).
	N            int       `json:"n"`
	Values       []float64 `json:"values,omitempty"`
	Unit         string    `json:"unit,omitempty"`
	Built        bool      `json:"built,omitempty"`
	BuildSeconds float64   `json:"build_seconds,omitempty"`
	BootSeconds  float64   `json:"boot_seconds,omitempty"`
	Note         string    `json:"note,omitempty"`
	// Failed is set when the commit did not build or boot (an error of
	// kind failed): the step is skipped.
	Failed string    `json:"failed,omitempty"`
	At     time.Time `json:"at"`
}

// Need is the measurement a resumed bisection asks for next.
type Need struct {
	Commit string `json:"commit"`
	Boots  int    `json:"boots"`
	// N is which measurement of Commit it is (0 = the first): the nth
	// measurement of a commit is a fresh one (the confirmation re-boots).
	N int `json:"n"`
}

// NthMeasurer is a Measurer told which measurement of the commit it makes,
// so that a measurement repeated after a crash is the same one (the same
// stored evaluation, resumed) and a confirmation is a new one.
type NthMeasurer interface {
	MeasureNth(ctx context.Context, commit string, boots, n int) (*Measurement, error)
}

// Measure makes the measurement need asks for with m and returns its
// record; a commit that does not build or boot is a record with Failed
// set, any other error is returned.
func Measure(ctx context.Context, m Measurer, need Need) (Record, error) {
	var meas *Measurement
	var err error
	if nm, ok := m.(NthMeasurer); ok {
		meas, err = nm.MeasureNth(ctx, need.Commit, need.Boots, need.N)
	} else {
		meas, err = m.Measure(ctx, need.Commit, need.Boots)
	}
	if err != nil && ctx.Err() != nil {
		rec, _ := RecordOf(need, meas, nil)
		return rec, err
	}
	return RecordOf(need, meas, err)
}

// RecordOf is the record of measurement need that measured meas (nil:
// nothing) with err: an error of kind failed (the commit does not build
// or boot) is recorded (Failed); any other is returned with the record.
func RecordOf(need Need, meas *Measurement, err error) (Record, error) {
	rec := Record{Commit: need.Commit, Boots: need.Boots, N: need.N, At: time.Now().UTC()}
	if meas != nil {
		rec.Values, rec.Unit, rec.Built, rec.Note = meas.Values, meas.Unit, meas.Built, meas.Note
		rec.BuildSeconds, rec.BootSeconds = meas.BuildTime.Seconds(), meas.BootTime.Seconds()
	}
	if err != nil {
		if fail.KindOf(err) != fail.KindFailed {
			return rec, err
		}
		rec.Failed = err.Error()
	}
	return rec, nil
}

// errNeed stops a replay at the first measurement not recorded.
type errNeed struct{ need Need }

func (e *errNeed) Error() string {
	return fmt.Sprintf("bisect: measurement of %s (%d boot(s)) not recorded yet", short(e.need.Commit), e.need.Boots)
}

// replay is a Measurer that gives the recorded measurements in order.
type replay struct {
	recs []Record
	next int
	seen map[string]int
}

func (r *replay) Measure(ctx context.Context, commit string, boots int) (*Measurement, error) {
	n := r.seen[commit]
	r.seen[commit]++
	if r.next >= len(r.recs) {
		return nil, &errNeed{Need{Commit: commit, Boots: boots, N: n}}
	}
	rec := r.recs[r.next]
	r.next++
	if rec.Commit != commit || rec.Boots != boots || rec.N != n {
		// The search is a function of the measurements: a different
		// request means the options or the repository changed.
		return nil, fail.Inputf("bisect: recorded measurement %d is of %s (%d boot(s), #%d) but the bisection asks for %s (%d boot(s), #%d): the range or the options changed since it started",
			r.next, short(rec.Commit), rec.Boots, rec.N, short(commit), boots, n)
	}
	m := &Measurement{Values: rec.Values, Unit: rec.Unit, Built: rec.Built, Note: rec.Note,
		BuildTime: time.Duration(rec.BuildSeconds * float64(time.Second)), BootTime: time.Duration(rec.BootSeconds * float64(time.Second))}
	if rec.Failed != "" {
		return m, fail.Failedf("%s", rec.Failed)
	}
	return m, nil
}

// Resume replays a bisection over its recorded measurements (oldest
// first): the search is a function of the measurements alone, so it takes
// the same steps as when they were made. It returns the finished result
// (need nil), or the result so far and the measurement to make next.
// started is when the bisection began (its wall time runs from there to
// the last record); o.Measurer is not used.
func Resume(ctx context.Context, o Options, recs []Record, started time.Time) (res *Result, need *Need, err error) {
	rp := &replay{recs: recs, seen: map[string]int{}}
	o.Measurer = rp
	res, err = Run(ctx, o)
	var en *errNeed
	if errors.As(err, &en) {
		need, err = &en.need, nil
	} else if err == nil && rp.next < len(recs) {
		err = fail.Inputf("bisect: %d recorded measurement(s) left over after the bisection ended: the range or the options changed since it started",
			len(recs)-rp.next)
	}
	if res != nil && !started.IsZero() {
		res.Started = started
		res.Wall = 0
		if len(recs) > 0 {
			res.Wall = recs[len(recs)-1].At.Sub(started)
		}
	}
	return res, need, err
}
