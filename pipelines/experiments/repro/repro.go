// Package repro writes the reproducer of a stored evaluation: everything
// a reader needs to check a result and rerun it from scratch — each
// kernel's final .config and build metadata, the base commit, the series'
// mbox and Message-IDs, the pipeline file as run, toolchain versions, the
// QEMU command lines, the guest agent and userland versions, the raw
// samples (CSV), and repro.sh, which reruns everything with patcheval in
// a fresh cache and compares the new samples with these.
//
// The entry point is Build (from the store); the Repro it returns is
// written as a directory (WriteDir, `patcheval repro <evaluation> [DIR]`;
// Replace, the repro/ directory `lore --pipeline` and serve's report
// stage write beside every report) or a tar.gz (WriteTarGz, the
// service's dashboard download). Compare
// checks two samples.csv files against each other.
package repro

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/patcheval/patcheval/build"
	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/runner"
	"github.com/patcheval/patcheval/pipelines/store"
)

// File is one file of a reproducer.
type File struct {
	Name string // slash-separated, relative
	Mode os.FileMode
	Data []byte
}

// Repro is a reproducer's files, in the order they are written.
type Repro struct {
	EvaluationID int64
	Files        []File
	// Missing names what the store no longer has (a kernel's .config
	// whose build cache was removed); also in MANIFEST.
	Missing []string
}

// Options steer Build.
type Options struct {
	// Command is how repro.sh calls patcheval (default "patcheval").
	Command string
	// Now dates the manifest (zero: time.Now).
	Now time.Time
}

// Manifest is manifest.json: the facts of the reproducer, structured.
type Manifest struct {
	EvaluationID int64     `json:"evaluation_id"`
	Key          string    `json:"key"`
	Status       string    `json:"status"`
	Written      time.Time `json:"written"`
	Pipeline     string    `json:"pipeline"`
	PipelineFile string    `json:"pipeline_file"` // in the reproducer
	Tree         string    `json:"tree"`
	Base         string    `json:"base"`
	BaseCommit   string    `json:"base_commit"`
	// Trees are the variants whose kernels build another tree than the
	// base: a ref, reverted changes (trees.txt).
	Trees    map[string]runner.VariantTree `json:"trees,omitempty"`
	Series   *Series                       `json:"series,omitempty"`
	Kernels  []Kernel                      `json:"kernels"`
	Runs     []Run                         `json:"runs"`
	Userland string                        `json:"userland,omitempty"`
	Samples  int                           `json:"samples"`
	Missing  []string                      `json:"missing,omitempty"`
}

// Series names the evaluated series.
type Series struct {
	Title      string   `json:"title"`
	Version    int      `json:"version"`
	MessageIDs []string `json:"message_ids"` // cover letter (if any), then the patches
}

// Kernel is one built kernel.
type Kernel struct {
	Variant    string            `json:"variant"`
	Arch       string            `json:"arch"`
	Commit     string            `json:"commit"`
	ConfigHash string            `json:"config_hash"`
	Config     string            `json:"config,omitempty"` // file in the reproducer
	Compiler   string            `json:"compiler,omitempty"`
	Tools      map[string]string `json:"tools,omitempty"`
	Make       []string          `json:"make_command,omitempty"`
}

// Run is one boot.
type Run struct {
	Variant       string   `json:"variant"`
	Boot          int      `json:"boot"`
	Status        string   `json:"status"`
	QEMU          []string `json:"qemu_args,omitempty"`
	Target        string   `json:"target"`
	KernelRelease string   `json:"kernel_release,omitempty"`
	AgentVersion  string   `json:"agent_version,omitempty"`
	Deterministic bool     `json:"deterministic"`
	// BuildID is the GNU build-id the running kernel showed; Verified
	// says it matched the built vmlinux's before any sample.
	BuildID  string `json:"build_id,omitempty"`
	Verified bool   `json:"verified,omitempty"`
}

// Build assembles the reproducer of evaluation id from st (and the
// kernels' .config files from their build cache directories).
func Build(st *store.Store, id int64, o Options) (*Repro, error) {
	e, err := st.Evaluation(id)
	if err != nil {
		return nil, err
	}
	in, err := runner.Load(st, id)
	if err != nil {
		return nil, err
	}
	builds, err := st.BuildsOf(id)
	if err != nil {
		return nil, err
	}
	runs, err := st.RunsOf(id)
	if err != nil {
		return nil, err
	}
	samples, err := st.Samples(id)
	if err != nil {
		return nil, err
	}
	timings, err := st.Timings(id)
	if err != nil {
		return nil, err
	}
	if o.Command == "" {
		o.Command = "patcheval"
	}
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	r := &Repro{EvaluationID: id}
	m := Manifest{EvaluationID: id, Key: e.Key, Status: e.Status, Written: o.Now.UTC().Truncate(time.Second),
		Pipeline: in.Pipeline.Name, Tree: in.Options.Tree, Base: in.BaseRef, BaseCommit: in.BaseHash,
		Samples: len(samples), Userland: timings["userland"].Note, Trees: in.Trees}

	// The pipeline as run.
	if in.PipelineSource != "" {
		m.PipelineFile = "pipeline.toml"
		r.add("pipeline.toml", 0o644, []byte(in.PipelineSource))
	}
	pj, err := json.MarshalIndent(in.Pipeline, "", "  ")
	if err != nil {
		return nil, fail.Infraf("evaluation %d: pipeline: %v", id, err)
	}
	r.add("pipeline.json", 0o644, append(pj, '\n'))

	// The base and the series.
	r.add("base.txt", 0o644, []byte(fmt.Sprintf("tree %s\nbase %s\ncommit %s\n", in.Options.Tree, in.BaseRef, in.BaseHash)))
	if len(in.Trees) > 0 {
		r.add("trees.txt", 0o644, []byte(treesText(in)))
	}
	if in.Series != nil {
		s := &Series{Title: in.Series.Title, Version: in.Series.Version}
		if in.Series.Cover != nil && !in.Series.Cover.NoMessageID {
			s.MessageIDs = append(s.MessageIDs, in.Series.Cover.MessageID)
		}
		for _, p := range in.Series.Patches {
			if p != nil && p.Msg != nil {
				s.MessageIDs = append(s.MessageIDs, p.MessageID)
			}
		}
		m.Series = s
		r.add("series.mbox", 0o644, in.Options.Mbox)
		r.add("message-ids.txt", 0o644, []byte(strings.Join(s.MessageIDs, "\n")+"\n"))
	}

	tools, err := r.addKernels(id, builds, &m)
	if err != nil {
		return nil, err
	}
	if m.Userland != "" {
		fmt.Fprintf(tools, "guest userland: %s\n", m.Userland)
	}
	r.add("toolchains.txt", 0o644, []byte(tools.String()))

	r.addBoots(runs, &m)

	// The samples.
	var csvBuf bytes.Buffer
	if err := WriteSamplesCSV(&csvBuf, samples); err != nil {
		return nil, err
	}
	r.add("samples.csv", 0o644, csvBuf.Bytes())

	script, err := reproScript(in, m, o.Command)
	if err != nil {
		return nil, err
	}
	r.add("repro.sh", 0o755, []byte(script))
	m.Missing = r.Missing
	mj, _ := json.MarshalIndent(m, "", "  ")
	r.add("manifest.json", 0o644, append(mj, '\n'))
	r.add("README", 0o644, []byte(readme(m)))
	return r, nil
}

// addKernels adds each kernel's config and build metadata (what the
// build cache still has; Missing says what it no longer has) to r and m,
// and returns the toolchains' lines.
func (r *Repro) addKernels(id int64, builds []store.Build, m *Manifest) (*strings.Builder, error) {
	tools := &strings.Builder{}
	seenKernel := map[string]bool{}
	for _, b := range builds {
		name := safeName(b.Variant) + "-" + safeName(b.Arch)
		if seenKernel[name] {
			continue
		}
		seenKernel[name] = true
		// The build's metadata (compiler, tools, make command) is the
		// artifact directory's metadata.json; the build row keeps the
		// runner's own (the pipeline's key, a cache hit), or, from
		// older runs and other recorders, the build's.
		// A failed build's directory is not its artifact: only an ok
		// build's metadata.json is read.
		metaJSON := b.Metadata
		if b.Status == "ok" && b.ArtifactDir != "" {
			if data, err := os.ReadFile(filepath.Join(b.ArtifactDir, "metadata.json")); err == nil {
				metaJSON = data
			}
		}
		var meta build.Metadata
		if len(metaJSON) > 0 {
			if err := json.Unmarshal(metaJSON, &meta); err != nil {
				return nil, fail.Infraf("evaluation %d: build %d metadata: %v", id, b.ID, err)
			}
		}
		// The runner's own row ({"key", "cache_hit"}) names no compiler:
		// it is not the build's metadata.
		buildMeta := meta.Compiler.VersionFull != ""
		k := Kernel{Variant: b.Variant, Arch: b.Arch, Commit: b.Commit, ConfigHash: b.ConfigHash,
			Compiler: meta.Compiler.VersionFull, Tools: meta.Tools, Make: meta.Build.MakeCommand}
		if b.Status != "ok" {
			r.Missing = append(r.Missing, fmt.Sprintf("kernels/%s.config: build %s (%s)", name, b.Status, firstLine(b.ErrorText)))
		} else if cfg, err := os.ReadFile(filepath.Join(b.ArtifactDir, "config")); err == nil {
			k.Config = "kernels/" + name + ".config"
			r.add(k.Config, 0o644, cfg)
		} else {
			r.Missing = append(r.Missing, fmt.Sprintf("kernels/%s.config: the build cache no longer has it (%s); the config hash is %s",
				name, b.ArtifactDir, b.ConfigHash))
		}
		if buildMeta {
			r.add("kernels/"+name+".metadata.json", 0o644, indentJSON(metaJSON))
		} else if b.Status == "ok" {
			r.Missing = append(r.Missing, fmt.Sprintf("kernels/%s.metadata.json: the build cache no longer has the build's metadata (%s); its compiler, tools and make command are not known",
				name, b.ArtifactDir))
		}
		fmt.Fprintf(tools, "%s (%s): %s", b.Variant, b.Arch, orNone(meta.Compiler.VersionFull))
		for _, t := range sortedKeys(meta.Tools) {
			fmt.Fprintf(tools, "; %s %s", t, meta.Tools[t])
		}
		tools.WriteString("\n")
		m.Kernels = append(m.Kernels, k)
	}
	return tools, nil
}

// addBoots adds the boots' QEMU command lines and guest environments
// (qemu.txt, guest.txt) to r and m.
func (r *Repro) addBoots(runs []store.Run, m *Manifest) {
	var qemu, guest strings.Builder
	for _, run := range runs {
		if slices.Contains(run.Env.QEMUArgs, evaluate.BootInitramfs) {
			fmt.Fprintf(&qemu, "# $INITRAMFS is the initramfs patcheval wrote for each boot (guest agent %s as /init, the boot's\n"+
				"# plan, the userland archive) and removed after it; repro.sh makes it again by running patcheval.\n",
				orNone(run.Env.AgentVersion))
			break
		}
	}
	for _, run := range runs {
		m.Runs = append(m.Runs, Run{Variant: run.Variant, Boot: run.Boot, Status: string(run.Status), QEMU: run.Env.QEMUArgs,
			Target: run.Env.Target, KernelRelease: run.Env.KernelRelease, AgentVersion: run.Env.AgentVersion, Deterministic: run.Env.Deterministic,
			BuildID: run.Env.BuildID, Verified: run.Env.Verified})
		fmt.Fprintf(&qemu, "# %s boot %d (%s)\n", run.Variant, run.Boot+1, run.Status)
		if len(run.Env.QEMUArgs) > 0 {
			qemu.WriteString(shellJoin(run.Env.QEMUArgs) + "\n")
		} else {
			fmt.Fprintf(&qemu, "# target %s: no QEMU command line\n", orNone(run.Env.Target))
		}
		fmt.Fprintf(&guest, "%s boot %d: kernel %s, agent %s, deterministic %v, kvm %v, perf events %s, build-id %s%s\n", run.Variant, run.Boot+1,
			orNone(run.Env.KernelRelease), orNone(run.Env.AgentVersion), run.Env.Deterministic, run.Env.KVM, orNone(run.Env.PerfEvents),
			orNone(run.Env.BuildID), verifiedNote(run.Env))
	}
	if m.Userland != "" {
		fmt.Fprintf(&guest, "userland: %s\n", m.Userland)
	}
	r.add("qemu.txt", 0o644, []byte(qemu.String()))
	r.add("guest.txt", 0o644, []byte(guest.String()))

}

func (r *Repro) add(name string, mode os.FileMode, data []byte) {
	r.Files = append(r.Files, File{Name: name, Mode: mode, Data: data})
}

// File returns the named file, or nil.
func (r *Repro) File(name string) *File {
	for i := range r.Files {
		if r.Files[i].Name == name {
			return &r.Files[i]
		}
	}
	return nil
}

// WriteDir writes the reproducer into dir, which must be missing or
// empty.
func (r *Repro) WriteDir(dir string) error {
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		return fail.Inputf("repro: %s is not empty: name a new directory", dir)
	}
	for _, f := range r.Files {
		p := filepath.Join(dir, filepath.FromSlash(f.Name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fail.Infra(err)
		}
		if err := os.WriteFile(p, f.Data, f.Mode); err != nil {
			return fail.Infra(err)
		}
	}
	return nil
}

// Replace writes the reproducer as dir, replacing what dir held (the
// reproducer an earlier run of the same evaluation wrote there): it is
// written beside dir first and renamed over it, so dir is never half
// written.
func (r *Repro) Replace(dir string) error {
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fail.Infra(err)
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+".new-")
	if err != nil {
		return fail.Infra(err)
	}
	defer os.RemoveAll(tmp)
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fail.Infra(err)
	}
	if err := r.WriteDir(tmp); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return fail.Infra(err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return fail.Infra(err)
	}
	return nil
}

// WriteTarGz writes the reproducer as a tar.gz whose files sit under
// prefix/ (e.g. patcheval-repro-12).
func (r *Repro) WriteTarGz(w io.Writer, prefix string, mtime time.Time) error {
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	dirs := map[string]bool{}
	for _, f := range r.Files {
		name := prefix + "/" + f.Name
		for d := filepath.Dir(filepath.FromSlash(name)); d != "." && !dirs[d]; d = filepath.Dir(d) {
			dirs[d] = true
		}
	}
	var ds []string
	for d := range dirs {
		ds = append(ds, filepath.ToSlash(d))
	}
	sort.Strings(ds)
	for _, d := range ds {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: mtime}); err != nil {
			return err
		}
	}
	for _, f := range r.Files {
		h := &tar.Header{Typeflag: tar.TypeReg, Name: prefix + "/" + f.Name, Mode: int64(f.Mode), Size: int64(len(f.Data)), ModTime: mtime}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := tw.Write(f.Data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

// verifiedNote says whether a boot's kernel was verified (evaluate.Verify).
func verifiedNote(env evaluate.Environment) string {
	if env.Verified {
		return " (verified against the built vmlinux)"
	}
	return ""
}

// SamplesHeader is samples.csv's header. build_id is the GNU build-id of
// the kernel the sample ran on, as it showed it.
var SamplesHeader = []string{"variant", "boot", "iteration", "benchmark", "metric", "value", "unit", "higher_is_better", "deterministic", "build_id"}

// WriteSamplesCSV writes samples in the store's order, one per row.
func WriteSamplesCSV(w io.Writer, samples []evaluate.Sample) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(SamplesHeader); err != nil {
		return err
	}
	for _, s := range samples {
		if err := cw.Write([]string{s.Variant, strconv.Itoa(s.Boot), strconv.Itoa(s.Iteration), s.Benchmark, s.Metric,
			strconv.FormatFloat(s.Value, 'g', -1, 64), s.Unit, strconv.FormatBool(s.HigherIsBetter), strconv.FormatBool(s.Deterministic), s.BuildID}); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

func indentJSON(b []byte) []byte {
	var out bytes.Buffer
	if json.Indent(&out, b, "", "  ") != nil {
		return b
	}
	out.WriteByte('\n')
	return out.Bytes()
}

func safeName(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' || r == '+' || r == '@' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

func orNone(s string) string {
	if s == "" {
		return "(not recorded)"
	}
	return s
}

func sortedKeys(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// shellJoin quotes args for sh.
func shellJoin(args []string) string {
	var out []string
	for _, a := range args {
		out = append(out, shellQuote(a))
	}
	return strings.Join(out, " ")
}

func shellQuote(s string) string {
	if s == evaluate.BootInitramfs {
		return `"` + s + `"`
	}
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=+,.:/@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// builtin reports whether name is a shipped pipeline.
func builtin(name string) bool {
	for _, n := range pipelines.List() {
		if n == name {
			return true
		}
	}
	return false
}

// treesText is trees.txt: each variant whose kernel builds a tree of its
// own, the ref and commit it starts from, and every revert commit with
// the commit or patch it reverts (repro.sh makes them again).
func treesText(in *runner.Stored) string {
	var names []string
	for n := range in.Trees {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		t := in.Trees[n]
		ref := t.Ref
		if ref == "" {
			ref = "base " + in.BaseRef
		}
		fmt.Fprintf(&b, "variant %s\n  ref %s\n  onto %s\n", n, ref, t.Onto)
		for _, r := range t.Reverted {
			orig := r.Original
			if orig == "" {
				orig = "(a patch of the series)"
			}
			fmt.Fprintf(&b, "  revert %s of %s: %s\n", r.Hash, orig, r.Label)
		}
		fmt.Fprintf(&b, "  head %s\n", t.Head)
	}
	return b.String()
}
