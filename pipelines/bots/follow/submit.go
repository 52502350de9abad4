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
	find := ss.Find
	if find == nil {
		// default is generated for this series, as lore does.
		find = func(name string) (*pipelines.Pipeline, error) { return pipelines.Named(name, s, nil) }
	}
	p, err := find(l.Pipeline)
	if err != nil {
		return 0, err
	}
	o := runner.Options{Mbox: runner.ThreadMbox(t), Version: s.Version, ThreadSource: t.Source, Tree: l.Tree,
		From: ss.From, TestedBy: ss.TestedBy, Lore: l.URL, Recipients: l.Policy(s.First()),
		PerPatch: l.PerPatch && len(s.Patches) > 1}
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
