package report

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/patcheval/patcheval/evaluate/stats"
	"github.com/patcheval/patcheval/internal/lazyre"
)

// KCIDB v5.3 I/O data (kernelci/kcidb-io, kcidb_io/schema/v05_03.py).
// Only the properties patcheval fills are declared; all are optional
// except the ids and origin.

// KCIDBOrigin is the origin of every object patcheval submits.
const KCIDBOrigin = "patcheval"

type kcidbData struct {
	Version   kcidbVersion    `json:"version"`
	Checkouts []kcidbCheckout `json:"checkouts"`
	Builds    []kcidbBuild    `json:"builds"`
	Tests     []kcidbTest     `json:"tests"`
}

type kcidbVersion struct {
	Major int `json:"major"`
	Minor int `json:"minor"`
}

type kcidbCheckout struct {
	ID               string         `json:"id"`
	Origin           string         `json:"origin"`
	TreeName         string         `json:"tree_name,omitempty"`
	GitRepositoryURL string         `json:"git_repository_url,omitempty"`
	GitCommitHash    string         `json:"git_commit_hash,omitempty"`
	GitCommitName    string         `json:"git_commit_name,omitempty"`
	PatchsetHash     *string        `json:"patchset_hash,omitempty"`
	MessageID        string         `json:"message_id,omitempty"`
	Comment          string         `json:"comment,omitempty"`
	StartTime        string         `json:"start_time,omitempty"`
	Valid            bool           `json:"valid"`
	Misc             map[string]any `json:"misc,omitempty"`
}

type kcidbBuild struct {
	ID           string         `json:"id"`
	CheckoutID   string         `json:"checkout_id"`
	Origin       string         `json:"origin"`
	Comment      string         `json:"comment,omitempty"`
	StartTime    string         `json:"start_time,omitempty"`
	Duration     float64        `json:"duration,omitempty"`
	Architecture string         `json:"architecture,omitempty"`
	ConfigName   string         `json:"config_name,omitempty"`
	Status       string         `json:"status"`
	Misc         map[string]any `json:"misc,omitempty"`
}

type kcidbNumber struct {
	Value  float64 `json:"value"`
	Unit   string  `json:"unit,omitempty"`
	Prefix string  `json:"prefix,omitempty"`
}

type kcidbEnvironment struct {
	Comment string         `json:"comment,omitempty"`
	Misc    map[string]any `json:"misc,omitempty"`
}

type kcidbTest struct {
	ID          string            `json:"id"`
	BuildID     string            `json:"build_id"`
	Origin      string            `json:"origin"`
	Environment *kcidbEnvironment `json:"environment,omitempty"`
	Path        string            `json:"path"`
	Comment     string            `json:"comment,omitempty"`
	Status      string            `json:"status"`
	Number      *kcidbNumber      `json:"number,omitempty"`
	StartTime   string            `json:"start_time,omitempty"`
	Misc        map[string]any    `json:"misc,omitempty"`
}

var (
	kcidbPathPart = lazyre.New(`[^a-zA-Z0-9_-]+`)
	kcidbArch     = lazyre.New(`^[a-z0-9_]*$`)
	sha1Re        = lazyre.New(`^[0-9a-f]{40}$`)
	gitURLRe      = lazyre.New(`^(https|git)://[^\s]+$`)
)

// pathPart makes a KCIDB test path component ([a-zA-Z0-9_-]+):
// "ns/op" -> "ns_per_op", "voluntary+dyn" -> "voluntary_dyn".
func pathPart(s string) string {
	s = strings.ReplaceAll(s, "/", "_per_")
	s = kcidbPathPart.ReplaceAllString(s, "_")
	s = strings.Trim(s, "_")
	if s == "" {
		s = "x"
	}
	return s
}

// idPart keeps ids readable and free of the characters that would upset
// a URL or a shell.
func idPart(s string) string { return pathPart(s) }

func kcidbTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04:05.000000+00:00")
}

// runID is r.ID, or a stable hash of what identifies the run.
func (r *Report) runID() string {
	if r.ID != "" {
		return idPart(r.ID)
	}
	h := sha256.Sum256([]byte(r.Title + "\x00" + r.Series.MessageID + "\x00" + r.Tree.Base + "\x00" + kcidbTime(r.Generated)))
	return hex.EncodeToString(h[:8])
}

// WriteKCIDB writes r as KCIDB v5.3 I/O data: two checkouts (the base,
// and the base with the Series applied) and one per tree of its own a
// Variant builds (a ref, reverts: variantCheckout), one build per Variant
// (on its tree's checkout), one test
// per Sample (path "<benchmark>.<metric>", status DONE, the value in
// "number") and one test per Comparison (path
// "<benchmark>.<metric>.vs_<base>", the change in percent in "number",
// the status from kcidbStatus, the statistics, threshold and, when
// inconclusive, the boots that would settle it in misc).
func WriteKCIDB(w io.Writer, r *Report) error {
	k := newKCIDBWriter(r)
	k.addCheckouts()
	k.addBuilds()
	k.addTests()
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(k.d)
}

// kcidbWriter is the state of one WriteKCIDB: the data so far and the ids
// its objects share.
type kcidbWriter struct {
	r     *Report
	pre   string // the ids' prefix: origin and run id
	start string // the run's start time
	base  string // the base commit, lower case
	arch  string // the architecture as KCIDB spells it
	d     kcidbData

	treeCheckout map[string]string // variant -> its own tree's checkout id
	buildID      map[string]string // variant -> its build's id
}

func newKCIDBWriter(r *Report) *kcidbWriter {
	pre := KCIDBOrigin + ":" + r.runID()
	arch := strings.ToLower(r.Arch)
	if !kcidbArch.MatchString(arch) {
		arch = regexp.MustCompile(`[^a-z0-9_]+`).ReplaceAllString(arch, "_")
	}
	return &kcidbWriter{r: r, pre: pre, start: kcidbTime(r.Generated), base: strings.ToLower(r.Tree.Base), arch: arch,
		// Empty lists, not null (KCIDB allows no nulls): a report without
		// samples (every boot failed) has no tests.
		d:            kcidbData{Version: kcidbVersion{Major: 5, Minor: 3}, Checkouts: []kcidbCheckout{}, Builds: []kcidbBuild{}, Tests: []kcidbTest{}},
		treeCheckout: map[string]string{}, buildID: map[string]string{}}
}

// addCheckouts adds the base's checkout and the series' (those a variant
// builds on; the base's alone without variants) and one per tree of a
// variant's own.
func (k *kcidbWriter) addCheckouts() {
	r := k.r
	needBase, needSeries := false, false
	for _, v := range r.Variants {
		switch {
		case v.OwnTree():
		case v.Patched:
			needSeries = true
		default:
			needBase = true
		}
	}
	if needBase || len(r.Variants) == 0 {
		k.d.Checkouts = append(k.d.Checkouts, k.checkout(false))
	}
	if needSeries {
		k.d.Checkouts = append(k.d.Checkouts, k.checkout(true))
	}
	for _, v := range r.Variants {
		if !v.OwnTree() {
			continue
		}
		c := variantCheckout(r, v, k.pre, k.start)
		k.treeCheckout[v.Name] = c.ID
		if !slices.ContainsFunc(k.d.Checkouts, func(o kcidbCheckout) bool { return o.ID == c.ID }) {
			k.d.Checkouts = append(k.d.Checkouts, c)
		}
	}
}

// checkout is the base's checkout, or (patched) the series' on it.
func (k *kcidbWriter) checkout(patched bool) kcidbCheckout {
	r, base := k.r, k.base
	c := kcidbCheckout{Origin: KCIDBOrigin, TreeName: oneLine(r.Tree.Name), GitCommitName: oneLine(r.Tree.BaseName),
		StartTime: k.start, Valid: true, Misc: map[string]any{}}
	if sha1Re.MatchString(base) {
		c.GitCommitHash = base
	} else if base != "" {
		c.Misc["base"] = oneLine(r.Tree.Base)
	}
	if gitURLRe.MatchString(r.Tree.URL) {
		c.GitRepositoryURL = r.Tree.URL
	} else if r.Tree.URL != "" || r.Tree.Path != "" {
		c.Misc["tree"] = oneLine(r.Tree.URL + r.Tree.Path)
	}
	if patched {
		c.ID = k.pre + ":checkout:series"
		ph := patchsetHash(r.Series.PatchHashes)
		c.PatchsetHash = &ph
		if id := cleanID(r.Series.MessageID); id != "" && strings.Contains(id, "@") {
			c.MessageID = id
		}
		c.Comment = oneLine(r.Series.Subject)
		if c.Comment == "" {
			c.Comment = oneLine(r.Series.Title)
		}
		var commits []string
		for _, cm := range r.Tree.Commits {
			commits = append(commits, cm.Hash)
		}
		if len(commits) > 0 {
			c.Misc["commits"] = commits
		}
		if r.Series.Link != "" {
			c.Misc["link"] = r.Series.Link
		}
	} else {
		c.ID = k.pre + ":checkout:base"
		empty := ""
		c.PatchsetHash = &empty
		c.Comment = "base"
	}
	if len(c.Misc) == 0 {
		c.Misc = nil
	}
	return c
}

// addBuilds adds one build per variant, on its checkout.
func (k *kcidbWriter) addBuilds() {
	for _, v := range k.r.Variants {
		b := k.variantBuild(v)
		k.buildID[v.Name] = b.ID
		k.d.Builds = append(k.d.Builds, b)
	}
}

// variantBuild is v's build, what it was built and booted with in misc.
func (k *kcidbWriter) variantBuild(v Variant) kcidbBuild {
	pre := k.pre
	b := kcidbBuild{ID: pre + ":build:" + idPart(v.Name), Origin: KCIDBOrigin, StartTime: k.start,
		Duration: v.BuildSeconds, Architecture: k.arch, ConfigName: v.Name, Status: "PASS",
		Comment: oneLine(v.Description)}
	b.CheckoutID = pre + ":checkout:base"
	if v.Patched {
		b.CheckoutID = pre + ":checkout:series"
	}
	misc := map[string]any{}
	if id, ok := k.treeCheckout[v.Name]; ok {
		b.CheckoutID = id
		if v.Ref != "" {
			misc["ref"] = oneLine(v.Ref)
		}
		if len(v.Reverted) > 0 {
			misc["reverted"] = v.Reverted
		}
	}
	if len(v.Config) > 0 {
		misc["config"] = v.Config
	}
	if v.Cmdline != "" {
		misc["cmdline"] = v.Cmdline
	}
	if len(v.Runtime) > 0 {
		misc["runtime"] = v.Runtime
	}
	if v.Kernel.ConfigHash != "" {
		misc["config_hash"] = v.Kernel.ConfigHash
	}
	if v.Env.KernelRelease != "" {
		misc["kernel_release"] = v.Env.KernelRelease
	}
	if v.Kernel.BuildID != "" {
		// The vmlinux's GNU build-id (not KCIDB's build_id, the id
		// of this build object).
		misc["vmlinux_build_id"] = v.Kernel.BuildID
	}
	if len(misc) > 0 {
		b.Misc = misc
	}
	return b
}

// bid is the id of variant's build; a variant the report does not
// describe still gets one.
func (k *kcidbWriter) bid(variant string) string {
	if id, ok := k.buildID[variant]; ok {
		return id
	}
	id := k.pre + ":build:" + idPart(variant)
	k.buildID[variant] = id
	k.d.Builds = append(k.d.Builds, kcidbBuild{ID: id, CheckoutID: k.pre + ":checkout:base", Origin: KCIDBOrigin,
		Architecture: k.arch, ConfigName: variant, Status: "PASS"})
	return id
}

// addTests adds, per benchmark, a test per sample and one per comparison,
// all in the report's target's environment.
func (k *kcidbWriter) addTests() {
	r := k.r
	env := &kcidbEnvironment{Comment: oneLine(targetText(r.Target)), Misc: map[string]any{
		"target": r.Target.Kind, "deterministic": r.Target.Deterministic}}
	if len(r.Target.Command) > 0 {
		env.Misc["command"] = r.Target.Command
	}
	if r.Target.Host != "" {
		env.Misc["host"] = r.Target.Host
	}
	for _, b := range r.Benchmarks {
		path := pathPart(b.Name) + "." + pathPart(b.Metric)
		k.addSampleTests(b, path, env)
		k.addComparisonTests(b, path, env)
	}
}

// addSampleTests adds a test per sample of b (status DONE, the value in
// "number"; ERROR for an invalid or non-finite one).
func (k *kcidbWriter) addSampleTests(b Benchmark, path string, env *kcidbEnvironment) {
	count := map[string]int{}
	for _, run := range b.Runs {
		count[run.Variant]++
		t := kcidbTest{
			ID:      fmt.Sprintf("%s:test:%s:%s:%d", k.pre, idPart(run.Variant), path, count[run.Variant]),
			BuildID: k.bid(run.Variant), Origin: KCIDBOrigin, Environment: env, Path: path,
			Status: "DONE", StartTime: kcidbTime(run.Time),
			Misc: map[string]any{"variant": run.Variant, "boot": run.Boot, "iteration": run.Iteration,
				"higher_is_better": b.HigherIsBetter},
		}
		if !run.Invalid && isFinite(run.Value) {
			t.Number = &kcidbNumber{Value: run.Value, Unit: unitOf(b)}
		} else {
			t.Status = "ERROR"
			t.Comment = "non-finite value"
		}
		if run.BuildID != "" {
			// The GNU build-id the running kernel showed.
			t.Misc["running_build_id"] = run.BuildID
		}
		if len(run.Extra) > 0 {
			extra := map[string]float64{}
			for name, v := range run.Extra {
				if isFinite(v) {
					extra[name] = v
				}
			}
			t.Misc["extra"] = extra
		}
		k.d.Tests = append(k.d.Tests, t)
	}
}

// addComparisonTests adds a test per comparison of b (the change in
// percent in "number", the status from kcidbStatus, the statistics in
// misc).
func (k *kcidbWriter) addComparisonTests(b Benchmark, path string, env *kcidbEnvironment) {
	for _, c := range b.Comparisons {
		cp := path + ".vs_" + pathPart(c.Base)
		t := kcidbTest{
			ID:      fmt.Sprintf("%s:test:%s:%s", k.pre, idPart(c.Other), cp),
			BuildID: k.bid(c.Other), Origin: KCIDBOrigin, Environment: env, Path: cp,
			Number:  &kcidbNumber{Value: c.Change, Unit: "%"},
			Comment: fmt.Sprintf("%s vs %s: %s", c.Other, c.Base, c.Label()),
			Misc: map[string]any{
				"base": c.Base, "other": c.Other, "verdict": string(c.Verdict), "reason": c.Reason,
				"rule": c.Rule, "ci_bounded": c.CIBounded, "ci_low_pct": c.CILow, "ci_high_pct": c.CIHigh,
				"confidence": c.Confidence, "welch_p": c.WelchP, "welch_tested": c.Tested,
				"mann_whitney_p": c.UP, "base_n": c.Comparison.Base.N, "other_n": c.Comparison.Other.N,
				"base_mean": c.Comparison.Base.Mean, "other_mean": c.Comparison.Other.Mean,
				"threshold_pct": c.Threshold, "below_threshold": c.BelowThreshold,
			},
		}
		if c.Hint != "" {
			t.Misc["more_boots"] = c.MoreBoots
			t.Misc["hint"] = c.Hint
		}
		t.Status = kcidbStatus(c.Comparison)
		if c.Verdict == stats.Inconclusive {
			if c.Hint != "" {
				t.Comment += "; " + c.Hint
			}
		}
		k.d.Tests = append(k.d.Tests, t)
	}
}

// variantCheckout is the checkout of a Variant that builds a tree of its
// own (a release A/B's ref, reverts): KCIDB's checkout is "a particular
// commit from a git repo, and a set of patches on top", so
// git_commit_hash is the commit its tree starts from (the ref's, or the
// base's) and git_commit_name the ref as asked. A revert is not a patch
// file anyone can fetch (patchset_files are URLs of files "git apply"
// takes, patchset_hash hashes those files): patcheval made it as a
// commit in its own branch, so the reverts are listed in misc (what
// each reverts, the revert commit, the head the kernel builds) and
// patchset_hash is left out ("data missing"), not "" (which says that
// nothing was applied). A ref without reverts has patchset_hash "".
// Variants building the same tree share one checkout (its id names the
// ref and the head).
func variantCheckout(r *Report, v Variant, pre, start string) kcidbCheckout {
	name := v.Ref
	if name == "" {
		name = r.Tree.BaseName
		if name == "" {
			name = "base"
		}
	}
	id := pre + ":checkout:tree-" + idPart(name)
	c := kcidbCheckout{Origin: KCIDBOrigin, TreeName: oneLine(r.Tree.Name), GitCommitName: oneLine(name),
		StartTime: start, Valid: true, Comment: oneLine(v.Tree), Misc: map[string]any{}}
	if c.Comment == "" {
		c.Comment = oneLine(name)
	}
	if onto := strings.ToLower(v.Onto); sha1Re.MatchString(onto) {
		c.GitCommitHash = onto
	} else if v.Ref == "" && sha1Re.MatchString(strings.ToLower(r.Tree.Base)) {
		c.GitCommitHash = strings.ToLower(r.Tree.Base)
	}
	if gitURLRe.MatchString(r.Tree.URL) {
		c.GitRepositoryURL = r.Tree.URL
	} else if r.Tree.URL != "" || r.Tree.Path != "" {
		c.Misc["tree"] = oneLine(r.Tree.URL + r.Tree.Path)
	}
	if v.Ref != "" {
		c.Misc["ref"] = oneLine(v.Ref)
	}
	if len(v.Reverts) == 0 && len(v.Reverted) == 0 {
		empty := ""
		c.PatchsetHash = &empty
	} else {
		var reverts []map[string]string
		for _, rc := range v.Reverts {
			m := map[string]string{"label": oneLine(rc.Label), "revert_commit": rc.Commit}
			if rc.Original != "" {
				m["reverted_commit"] = rc.Original
			}
			reverts = append(reverts, m)
		}
		if len(reverts) == 0 { // a report from before Reverts: the labels
			for _, l := range v.Reverted {
				reverts = append(reverts, map[string]string{"label": oneLine(l)})
			}
		}
		c.Misc["reverts"] = reverts
		head := v.Head
		if head == "" {
			head = "reverted"
		} else {
			c.Misc["head"] = head
		}
		id += "-" + idPart(shortHash(head))
	}
	c.ID = id
	if len(c.Misc) == 0 {
		c.Misc = nil
	}
	return c
}

// shortHash is a commit hash's first 12 characters.
func shortHash(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// kcidbStatus maps a verdict onto a KCIDB test status: FAIL for a
// regression of at least the threshold, PASS for an improvement, an
// equivalent result or a regression below the threshold (significant,
// but smaller than what the pipeline says matters; the comment says so),
// DONE for inconclusive (measured, no verdict).
func kcidbStatus(c stats.Comparison) string {
	switch c.Verdict {
	case stats.Regression:
		if c.BelowThreshold {
			return "PASS"
		}
		return "FAIL"
	case stats.Improvement, stats.Equivalent:
		return "PASS"
	}
	return "DONE"
}

func unitOf(b Benchmark) string {
	if b.Unit != "" {
		return b.Unit
	}
	return b.Metric
}

func isFinite(v float64) bool { return v == v && v-v == 0 }

// patchsetHash is KCIDB's patchset_hash: sha256 over the newline-terminated
// sha256 hex sums of each patch, in order; "" for no patches.
func patchsetHash(sums []string) string {
	if len(sums) == 0 {
		return ""
	}
	var b strings.Builder
	for _, s := range sums {
		b.WriteString(s)
		b.WriteByte('\n')
	}
	return sha256Hex(b.String())
}
