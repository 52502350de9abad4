package follow

import (
	"context"
	"fmt"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/lazyre"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/runner"
	"github.com/patcheval/patcheval/series"
)

// Service is what the follower needs of the evaluation service (the
// methods of pipelines/service.Service): Submit creates the evaluation
// (runner.Submit) and queues its first stage; Cancel cancels its queued
// and running work.
type Service interface {
	Submit(ctx context.Context, p *pipelines.Pipeline, o runner.Options) (id int64, created bool, err error)
	Cancel(ctx context.Context, id int64) error
}

// ServiceSubmitter is the Submitter `patcheval serve` gives a Follower:
// it submits a series through the service with the list's pipeline, tree
// and base policy.
type ServiceSubmitter struct {
	Service Service
	// From signs the reply drafts; TestedBy asks for the trailer.
	From     mbox.Address
	TestedBy bool
	// Find resolves a pipeline name (default pipelines.Named for the
	// series: a shipped name, a file, or default).
	Find func(string) (*pipelines.Pipeline, error)
}

var branchUnsafe = lazyre.New(`[^A-Za-z0-9._-]+`)

// Submit implements Submitter.
func (ss ServiceSubmitter) Submit(ctx context.Context, l List, s *series.Series, t *mbox.Thread) (int64, error) {
	return ss.submit(ctx, l, s, t, nil)
}

// threadOptions are the runner's options for version v of t's series:
// the thread Submit stores.
func threadOptions(t *mbox.Thread, v int) runner.Options {
	return runner.Options{Mbox: runner.ThreadMbox(t), Version: v, ThreadSource: t.Source}
}

// Resolve implements ResolvingSubmitter: runner.Resolve of the thread
// Submit stores.
func (ss ServiceSubmitter) Resolve(ctx context.Context, t *mbox.Thread, v int) (*runner.Resolved, error) {
	return runner.Resolve(ctx, threadOptions(t, v))
}

// SubmitResolved implements ResolvingSubmitter.
func (ss ServiceSubmitter) SubmitResolved(ctx context.Context, l List, r *runner.Resolved, t *mbox.Thread) (int64, error) {
	return ss.submit(ctx, l, r.Series(), t, r)
}

// submit is Submit of s, which r resolved when set (Options.Resolved).
func (ss ServiceSubmitter) submit(ctx context.Context, l List, s *series.Series, t *mbox.Thread, r *runner.Resolved) (int64, error) {
	find := ss.Find
	if find == nil {
		// default is generated for this series, as lore does.
		find = func(name string) (*pipelines.Pipeline, error) { return pipelines.Named(name, s, nil) }
	}
	p, err := find(l.Pipeline)
	if err != nil {
		return 0, err
	}
	o := threadOptions(t, s.Version)
	o.Tree, o.From, o.TestedBy, o.Lore, o.Recipients = l.Tree, ss.From, ss.TestedBy, l.URL, l.Policy(s.First())
	o.PerPatch, o.Resolved = l.PerPatch && len(s.Patches) > 1, r
	switch l.Base {
	case "series":
		if s.Base.Commit == "" {
			return 0, fail.Inputf("%s: base = \"series\" but the series names no base-commit", l.Name)
		}
		o.Base = s.Base.Commit
	default:
		o.Base = "HEAD"
	}
	id := ""
	if m := s.First(); m != nil {
		id = m.MessageID
	}
	o.Branch = fmt.Sprintf("patcheval/%s/%.40s-v%d", l.Name, branchUnsafe.ReplaceAllString(id, "_"), s.Version)
	evalID, _, err := ss.Service.Submit(ctx, p, o)
	return evalID, err
}

// Cancel implements Submitter.
func (ss ServiceSubmitter) Cancel(ctx context.Context, id int64) error {
	return ss.Service.Cancel(ctx, id)
}
