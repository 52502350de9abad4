package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/patcheval/patcheval/build"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/store"
)

// Configure configures and verifies every kernel of evaluation id that is
// not built yet: base config, fragments, the variant's symbols, make
// olddefconfig and the check that each requested symbol holds (a
// build.Options.ConfigOnly build: nothing is compiled). It returns the
// kernels that cannot be configured as asked, by key, with the
// *build.ConfigError (or the config stage's *build.KernelError) that
// says why; any other error stops it.
//
// Run configures every kernel before it compiles any, so that a variant
// the tree cannot give stops the evaluation before minutes of compiling
// (or, with Options.KeepGoing, is dropped from it).
func Configure(ctx context.Context, env Env, id int64) (map[string]error, error) {
	ev, err := loadInputs(env.Store, id)
	if err != nil {
		return nil, err
	}
	failed := map[string]error{}
	for _, spec := range ev.p.Builds() {
		r, err := configureOne(ctx, env, id, ev, spec)
		if err != nil {
			return nil, err
		}
		if r != nil {
			failed[spec.Key] = r.err
		}
	}
	return failed, nil
}

// ConfigureKernel configures and verifies evaluation id's kernel key
// without compiling it, as Configure does every kernel: the stage
// graph's StageConfigure, which the service takes one job per kernel
// (the builds follow the last of them). A kernel that cannot be
// configured as asked is bad input that names its variant, says why and
// that no kernel of the evaluation was compiled; it is recorded as the
// kernel's failed build (nothing compiled; its directory holds the
// configure's log and .config), so that the evaluation's pages say why
// it failed.
func ConfigureKernel(ctx context.Context, env Env, id int64, key string) (err error) {
	defer failed(ctx, env, id, &err)
	ev, spec, err := loadKernel(env, id, key)
	if err != nil {
		return err
	}
	r, err := configureOne(ctx, env, id, ev, spec)
	if err != nil || r == nil {
		return err
	}
	refused := fail.Inputf("variant %s cannot be configured on this tree; no kernel of the evaluation was compiled: %w", spec.Variant, r.err)
	b := store.Build{Variant: spec.Variant, Arch: spec.Arch, Commit: r.commit, Status: "failed",
		ErrorKind: fail.KindInput.String(), ErrorText: refused.Error()}
	if r.art != nil {
		b.ArtifactDir = r.art.Dir
	}
	if err := env.Store.Tx(ctx, func(tx *store.Tx) error {
		_, err := env.Store.RecordBuildTx(tx, id, b)
		return err
	}); err != nil {
		return err
	}
	return refused
}

// configRefusal is why a kernel cannot be configured as asked: the
// *build.ConfigError (or the config stage's *build.KernelError), the
// commit and the failed configure's artifact (its log; nil when none was
// kept).
type configRefusal struct {
	err    error
	commit string
	art    *build.Artifact
}

// configureOne configures one kernel (config only): a refusal when it
// cannot be configured as asked; err is any other error. A kernel built
// before (recorded, or in the build cache) was configured and verified
// then.
func configureOne(ctx context.Context, env Env, id int64, ev *evaluation, spec pipelines.BuildSpec) (*configRefusal, error) {
	if err := ctx.Err(); err != nil {
		return nil, fail.Infra(err)
	}
	if art, err := builtArtifact(env, id, spec); err != nil || art != nil {
		return nil, err
	}
	req, err := buildRequest(ctx, env, ev, spec)
	if err != nil {
		return nil, err
	}
	pr := env.progress()
	opts := build.Options{CacheDir: env.CacheDir, Jobs: env.Jobs, Progress: pr, NoNetwork: true, CompilerCache: env.CompilerCache}
	if art, err := build.Cached(ctx, req, opts); err == nil && art != nil {
		return nil, nil // built before: it was configured and verified then
	}
	pr.Status("configuring %s/%s", spec.Arch, spec.Variant)
	opts.ConfigOnly = true
	art, err := build.Build(ctx, req, opts)
	var ce *build.ConfigError
	var ke *build.KernelError
	switch {
	case err == nil:
		return nil, nil
	case errors.As(err, &ce), errors.As(err, &ke) && ke.Stage == "config":
		return &configRefusal{err: err, commit: req.Commit, art: art}, nil
	default:
		return nil, fmt.Errorf("configuring %s/%s: %w", spec.Arch, spec.Variant, err)
	}
}

// configureFirst runs Configure and then, when some kernels cannot be
// configured, either stops (the error names every one of them; nothing
// was compiled) or, with keepGoing, drops their variants from the stored
// evaluation (pipelines.WithoutVariants) with a note per dropped variant
// for the report. It returns the kernels left to build.
func configureFirst(ctx context.Context, env Env, id int64, keys []string, keepGoing bool) ([]string, error) {
	failed, err := Configure(ctx, env, id)
	if err != nil || len(failed) == 0 {
		return keys, err
	}
	ev, err := loadInputs(env.Store, id)
	if err != nil {
		return nil, err
	}
	var names []string
	var errs []error
	reasons := map[string][]string{}
	for _, spec := range ev.p.Builds() {
		ferr, ok := failed[spec.Key]
		if !ok {
			continue
		}
		if _, seen := reasons[spec.Variant]; !seen {
			names = append(names, spec.Variant)
		}
		reasons[spec.Variant] = append(reasons[spec.Variant], spec.Arch+": "+configSummary(ferr))
		errs = append(errs, ferr)
	}
	if !keepGoing {
		return nil, fmt.Errorf("variant(s) %s cannot be configured on this tree; no kernel was compiled (--keep-going runs the other variants): %w",
			strings.Join(names, ", "), errors.Join(errs...))
	}
	p, notes, err := ev.p.WithoutVariants(names)
	if err != nil {
		return nil, fail.Inputf("--keep-going: %v: %w", err, errors.Join(errs...))
	}
	in := ev.in
	for _, n := range names {
		note := fmt.Sprintf("variant %s dropped (--keep-going): it cannot be configured: %s", n, strings.Join(reasons[n], "; "))
		env.progress().Printf("warning: %s", note)
		in.Notes = append(in.Notes, note)
	}
	for _, n := range notes {
		in.Notes = append(in.Notes, n+" (--keep-going)")
	}
	if in.Pipeline, err = json.Marshal(p); err != nil {
		return nil, fail.Infraf("evaluation %d: pipeline: %w", id, err)
	}
	mbox := in.Mbox
	in.Mbox = nil
	data, err := json.Marshal(in)
	if err != nil {
		return nil, fail.Infraf("evaluation %d: inputs: %w", id, err)
	}
	if err := env.Store.Tx(keep(ctx), func(tx *store.Tx) error { return env.Store.SetInputsTx(tx, id, data, mbox) }); err != nil {
		return nil, err
	}
	keys = nil
	for _, s := range p.Builds() {
		keys = append(keys, s.Key)
	}
	return keys, nil
}

// configSummary is one line per refusal: each symbol that does not hold
// and the first line of why.
func configSummary(err error) string {
	var ce *build.ConfigError
	if !errors.As(err, &ce) {
		return firstLine(err.Error())
	}
	var parts []string
	for _, p := range ce.Problems {
		fin := p.Final
		if fin == "" {
			fin = "absent"
		}
		s := fmt.Sprintf("CONFIG_%s=%s requested, final %s", p.Symbol, p.Requested, fin)
		if p.Why != "" {
			s += " (" + firstLine(p.Why) + ")"
		}
		parts = append(parts, s)
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}
