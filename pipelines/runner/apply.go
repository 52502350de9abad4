package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/patcheval/patcheval/evaluate/report"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/gittree"
	"github.com/patcheval/patcheval/internal/xdg"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/store"
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
	if s := ev.series; s != nil && ev.p.NeedsSeries() {
		start := time.Now()
		pr := env.progress()
		pr.Status("applying %d patch(es) onto %s", len(s.Patches), ev.in.baseName())
		res, err := apply.Apply(ctx, ev.in.Tree, apply.FromSeries(s, ev.in.AM), apply.Options{
			Base:       ev.in.BaseHash,
			SeriesBase: s.Base.Commit,
			Branch:     ev.in.Branch,
			Fuzz:       ev.in.Fuzz,
			ThreeWay:   ev.in.ThreeWay,
		})
		if err != nil {
			var af *apply.Failure
			if errors.As(err, &af) {
				if rerr := recordApplyFailure(env, ev, af); rerr != nil {
					return rerr // infra: the stage is retried
				}
			}
			return err
		}
		applied = store.Applied{Head: res.Head, Branch: res.Branch}
		for _, c := range res.Commits {
			applied.Commits = append(applied.Commits, store.AppliedCommit{Hash: c.Hash, Tree: c.Tree, Subject: c.Subject})
			applied.Tree = c.Tree
		}
		took, note = time.Since(start), fmt.Sprintf("branch %s", res.Branch)
		pr.Printf("applied %d patch(es) on %s: %s (%s)", len(res.Commits), ev.in.baseName(), short(res.Head), res.Branch)
	}
	inputs, err := seriesInputs(ctx, env, ev, applied.Head)
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

// recordApplyFailure stores why ev's series did not apply, with the
// reply that tells its author precisely (the patch, file and hunk, what
// the patch expects and what the file has, the base): the bots' reporters
// and the dashboard read it. No reply when there is nobody to answer or
// nobody takes it (Options.Recipients); the failure is stored anyway.
func recordApplyFailure(env Env, ev *evaluation, af *apply.Failure) error {
	kind := "failed"
	if fail.KindOf(af) == fail.KindInput {
		kind = "input"
	}
	f := store.ApplyFailure{EvaluationID: ev.id, Patch: af.Patch, Total: len(ev.series.Patches), Label: af.Label,
		MessageID: af.MessageID, Applied: af.Applied, File: af.File, Hunk: af.Hunk, HunkHeader: af.HunkHeader,
		Reason: af.Reason, ErrorKind: kind, Tree: ev.in.Tree, Base: af.Base,
		BaseSubject: af.BaseSubject, BaseReason: af.BaseReason, ThreeWay: af.ThreeWay}
	if ev.in.BaseWhy != "" && af.BaseReason == "--base "+ev.in.BaseHash {
		// Apply was given the resolved base: say how it was chosen.
		f.BaseReason = ev.in.BaseWhy
	} else if ev.in.Base != "" && af.BaseReason == "--base "+ev.in.BaseHash {
		f.BaseReason = "--base " + ev.in.Base // stored before the base rule
	}
	d, err := applyFailureReply(ev, &f)
	switch {
	case err != nil:
		env.progress().Printf("no reply about the apply failure: %v", err)
	case d != nil:
		b, err := json.Marshal(d)
		if err != nil {
			return fail.Infraf("evaluation %d: reply: %w", ev.id, err)
		}
		f.Reply = string(b)
	}
	return env.Store.RecordApplyFailure(f)
}

// applyFailureReply is the reply to the patch that did not apply (the
// series' first message when that patch has none).
func applyFailureReply(ev *evaluation, f *store.ApplyFailure) (*report.Draft, error) {
	parent := ev.series.First()
	if i := f.Patch - 1; i >= 0 && i < len(ev.series.Patches) && ev.series.Patches[i].Msg != nil {
		parent = ev.series.Patches[i].Msg
	}
	if parent == nil {
		return nil, nil
	}
	o := report.DraftOptions{From: ev.in.From, Now: ev.in.Now}
	if ev.in.Recipients != nil {
		// A series that does not apply is a problem its author has to
		// act on, like a regression: who gets regressions gets this.
		a, err := addressing(ev, true)
		if err != nil {
			return nil, err
		}
		if len(a.To) == 0 {
			return nil, nil // nobody takes this result
		}
		o.To, o.Cc = a.To, a.Cc
	}
	return report.NewNotice(parent, o, applyFailureText(f))
}

// applyFailureText is what a maintainer answers a series that does not
// apply: which patch, where and why, on which base, and what to do.
func applyFailureText(f *store.ApplyFailure) string {
	patch, base := f.Where()
	var b strings.Builder
	if f.ErrorKind == "input" {
		fmt.Fprintf(&b, "%s is not a valid patch, so patcheval could not apply the series and did not evaluate it:\n\n", upper(patch))
	} else {
		fmt.Fprintf(&b, "%s does not apply to %s, so patcheval did not evaluate this series:\n\n", upper(patch), base)
	}
	if f.File != "" {
		b.WriteString("  " + f.File + ":\n")
	}
	for _, l := range strings.Split(f.Reason, "\n") {
		b.WriteString("  " + l + "\n")
	}
	if f.ThreeWay != "" {
		b.WriteString("\nThe 3-way fallback (git am -3) failed too:\n\n")
		for _, l := range strings.Split(f.ThreeWay, "\n") {
			b.WriteString("  " + l + "\n")
		}
	}
	b.WriteString("\n")
	switch {
	case f.Applied == 1:
		b.WriteString("The patch before it applied. ")
	case f.Applied > 1:
		fmt.Fprintf(&b, "The %d patches before it applied. ", f.Applied)
	}
	fmt.Fprintf(&b, "The base was %s, chosen as: %s.\n\n", base, f.BaseReason)
	b.WriteString("If the series is meant for another tree or commit, please name it with git format-patch " +
		"--base (a base-commit: line patcheval uses when its tree has that commit); otherwise please rebase " +
		"the series and resend.\n")
	return b.String()
}

func upper(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// seriesInputs are ev's inputs once the series is applied at head: notes
// on what the pipeline's kernels do not build of it, and with Cover the
// pipeline whose kernels also get the symbols that build its C files. nil
// when nothing changes.
func seriesInputs(ctx context.Context, env Env, ev *evaluation, head string) ([]byte, error) {
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
		if err := storeFiles(ctx, env, &in, cp); err != nil {
			return nil, err
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
