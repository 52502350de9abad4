package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	"github.com/patcheval/patcheval/evaluate/store"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/gittree"
	"github.com/patcheval/patcheval/internal/xdg"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/series/apply"
)

// Apply writes evaluation id's series onto its base as a branch and
// records the applied commits. An evaluation already applied is left as it
// is; one whose pipeline applies no series records an empty application.
func Apply(ctx context.Context, env Env, id int64) (err error) {
	defer failed(ctx, env, id, &err)
	if err := ctx.Err(); err != nil {
		return fail.Infra(err) // interrupted: start nothing
	}
	if a, err := env.Store.AppliedOf(id); err != nil || a != nil {
		return err
	}
	ev, err := load(env, id)
	if err != nil {
		return err
	}
	var applied store.Applied
	var took time.Duration
	var note string
	if s := ev.series; s != nil {
		start := time.Now()
		pr := env.progress()
		pr.Status("applying %d patch(es) onto %s", len(s.Patches), ev.in.Base)
		res, err := apply.Apply(ctx, ev.in.Tree, apply.FromSeries(s, ev.in.AM), apply.Options{
			Base:       ev.in.BaseHash,
			SeriesBase: s.Base.Commit,
			Branch:     ev.in.Branch,
			Fuzz:       ev.in.Fuzz,
			ThreeWay:   ev.in.ThreeWay,
		})
		if err != nil {
			return err
		}
		applied = store.Applied{Head: res.Head, Branch: res.Branch}
		for _, c := range res.Commits {
			applied.Commits = append(applied.Commits, store.AppliedCommit{Hash: c.Hash, Tree: c.Tree, Subject: c.Label})
			applied.Tree = c.Tree
		}
		took, note = time.Since(start), fmt.Sprintf("branch %s", res.Branch)
		pr.Printf("applied %d patch(es) on %s: %s (%s)", len(res.Commits), ev.in.Base, short(res.Head), res.Branch)
	}
	inputs, err := seriesInputs(env, ev, applied.Head)
	if err != nil {
		return err
	}
	return env.Store.Tx(keep(ctx), func(tx *store.Tx) error {
		if err := env.Store.RecordAppliedTx(tx, id, applied); err != nil {
			return err
		}
		if inputs != nil {
			if err := env.Store.SetInputsTx(tx, id, inputs, ev.in.Mbox); err != nil {
				return err
			}
		}
		if applied.Head != "" {
			if err := env.Store.AddTimingTx(tx, id, "apply", took, note); err != nil {
				return err
			}
		}
		return record(ctx, env, tx)
	})
}

// seriesInputs are ev's inputs once the series is applied at head: notes
// on what the pipeline's kernels do not build of it, and with Cover the
// pipeline whose kernels also get the symbols that build its C files. nil
// when nothing changes.
func seriesInputs(env Env, ev *evaluation, head string) ([]byte, error) {
	if ev.series == nil {
		return nil, nil
	}
	in := ev.in
	pr := env.progress()
	files := pipelines.SeriesFiles(ev.series)
	for _, w := range ev.p.SeriesWarnings(files) {
		pr.Printf("warning: %s", w)
		in.Notes = append(in.Notes, w)
	}
	if in.Cover && head != "" {
		cache := env.CacheDir
		if cache == "" {
			cache = xdg.CacheDir()
		}
		cp, note, err := withCover(ev.p, in.Tree, head, files, filepath.Join(cache, "cover", fmt.Sprint(ev.id)))
		if err != nil {
			return nil, err
		}
		if in.Pipeline, err = json.Marshal(cp); err != nil {
			return nil, fail.Infraf("evaluation %d: pipeline: %w", ev.id, err)
		}
		if note != "" {
			pr.Printf("%s", note)
			in.Notes = append(in.Notes, note)
		}
	}
	if len(in.Notes) == 0 && !in.Cover {
		return nil, nil
	}
	in.Mbox = nil
	data, err := json.Marshal(in)
	if err != nil {
		return nil, fail.Infraf("evaluation %d: inputs: %w", ev.id, err)
	}
	return data, nil
}

// applied is evaluation id's applied series; Apply must have run.
func appliedOf(env Env, id int64) (*store.Applied, error) {
	a, err := env.Store.AppliedOf(id)
	if err == nil && a == nil {
		err = fail.Inputf("evaluation %d: the series is not applied yet (run the apply stage first)", id)
	}
	return a, err
}

// resolveCommit is rev's commit hash in the tree at repo.
func resolveCommit(repo, rev string) (string, error) {
	c, err := gittree.Resolve(repo, rev)
	if err != nil {
		return "", err
	}
	return c.Hash.String(), nil
}
