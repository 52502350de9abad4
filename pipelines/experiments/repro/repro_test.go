package repro

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/patcheval/patcheval/build"
	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/internal/testenv"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/runner"
	"github.com/patcheval/patcheval/pipelines/store"
)

// seed stores an evaluation of the v6.1 backport with ppc-preempt-dynamic
// as the stages would have recorded it — builds with metadata and a
// .config in their artifact directories, boots with QEMU command lines
// and samples — without building or booting a kernel.
func seed(t *testing.T) (*store.Store, int64, []evaluate.Sample) {
	t.Helper()
	tree := testenv.LinuxTree(t)
	root := t.TempDir()
	st, err := store.Open(filepath.Join(root, "patcheval.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	p, err := pipelines.Find("ppc-preempt-dynamic")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(testenv.BackportMbox())
	if err != nil {
		t.Fatal(err)
	}
	id, _, err := runner.Submit(context.Background(), runner.Env{Store: st}, p, runner.Options{Mbox: data, Tree: tree, Base: testenv.BaseCommit, Boots: 2,
		From: mbox.Address{Name: "T", Email: "t@example.org"}})
	if err != nil {
		t.Fatal(err)
	}
	var samples []evaluate.Sample
	for i, v := range p.Variants {
		if v.Kernel == v.Name { // a kernel of its own
			dir := filepath.Join(root, "builds", v.Name)
			os.MkdirAll(dir, 0o755)
			os.WriteFile(filepath.Join(dir, "config"), []byte("CONFIG_PPC64=y\nCONFIG_VARIANT_"+strings.ToUpper(strings.NewReplacer("+", "_", "@", "_").Replace(v.Name))+"=y\n"), 0o644)
			meta := build.Metadata{Compiler: build.MetaCompiler{Name: "gcc", Version: "12", VersionFull: "powerpc64le-linux-gnu-gcc (Debian 12.2.0-14) 12.2.0"},
				Tools: map[string]string{"make": "GNU Make 4.3"}, Build: build.MetaBuild{MakeCommand: []string{"make", "ARCH=powerpc", "vmlinux"}}}
			// As the build and the runner leave them: the build's
			// metadata in its artifact directory, the build row's
			// metadata the runner's own (the pipeline's key, a cache hit).
			mj, _ := json.Marshal(meta)
			os.WriteFile(filepath.Join(dir, "metadata.json"), mj, 0o644)
			if _, err := st.RecordBuild(id, store.Build{Variant: v.Name, Arch: "ppc64le", Commit: "abc", ConfigHash: "h" + v.Name,
				ArtifactDir: dir, Status: "ok", Metadata: []byte(`{"key":"ppc64le-` + v.Name + `","cache_hit":true}`)}); err != nil {
				t.Fatal(err)
			}
		}
		for boot := 0; boot < 2; boot++ {
			run, err := st.BeginRun(id, v.Name, boot)
			if err != nil {
				t.Fatal(err)
			}
			smp := []evaluate.Sample{{Variant: v.Name, Benchmark: "kill", Metric: "ns/op", Value: 955 + float64(10*i+boot), Unit: "ns/op", Boot: boot, Deterministic: true,
				Time: time.Unix(0, 0)}}
			env := evaluate.Environment{Target: "qemu", KernelRelease: "6.1.0", AgentVersion: "agent-1.2", Deterministic: true,
				QEMUArgs: []string{"qemu-system-ppc64", "-M", "pseries", "-append", "console=hvc0 preempt=" + v.Name, "-icount", "shift=0,sleep=off",
					"-initrd", evaluate.BootInitramfs}, BuildID: fmt.Sprintf("%040x", i+1), Verified: true}
			if err := st.FinishRun(run, store.RunOK, env, nil, smp); err != nil {
				t.Fatal(err)
			}
			samples = append(samples, smp...)
		}
	}
	return st, id, samples
}

func TestBuildFromStore(t *testing.T) {
	st, id, samples := seed(t)
	r, err := Build(st, id, Options{Now: time.Unix(1700000000, 0)})
	if err != nil {
		t.Fatal(err)
	}
	file := func(name string) string {
		t.Helper()
		f := r.File(name)
		if f == nil {
			t.Fatalf("no %s in the reproducer (files: %v)", name, names(r))
		}
		return string(f.Data)
	}
	src, _ := pipelines.BuiltinSource("ppc-preempt-dynamic")
	if file("pipeline.toml") != string(src) {
		t.Error("pipeline.toml is not the pipeline as run")
	}
	if !strings.Contains(file("series.mbox"), "Subject: [PATCH 6.1 v4 1/1] powerpc: enable dynamic preemption") {
		t.Error("series.mbox lacks the patch")
	}
	if ids := strings.Fields(file("message-ids.txt")); len(ids) != 2 || !strings.Contains(ids[0], "4121-0-tester@example.org") {
		t.Errorf("message-ids.txt: %q", ids)
	}
	if b := file("base.txt"); !strings.Contains(b, "base v6.1-debian\ncommit ") {
		t.Errorf("base.txt: %q", b)
	}
	if c := file("kernels/voluntary+dyn-ppc64le.config"); !strings.Contains(c, "CONFIG_VARIANT_VOLUNTARY_DYN=y") {
		t.Errorf("voluntary+dyn .config: %q", c)
	}
	if r.File("kernels/voluntary+dyn@full-ppc64le.config") != nil {
		t.Error("a runtime-only variant got a kernel of its own")
	}
	if tc := file("toolchains.txt"); !strings.Contains(tc, "full (ppc64le): powerpc64le-linux-gnu-gcc (Debian 12.2.0-14) 12.2.0; make GNU Make 4.3") {
		t.Errorf("toolchains.txt: %q", tc)
	}
	// The per-boot initramfs is gone after the boot: qemu.txt names it
	// $INITRAMFS and says what it held, not a temporary path.
	if q := file("qemu.txt"); !strings.Contains(q, "qemu-system-ppc64 -M pseries -append 'console=hvc0 preempt=voluntary+dyn@full' -icount shift=0,sleep=off -initrd \"$INITRAMFS\"\n") ||
		!strings.HasPrefix(q, "# $INITRAMFS is the initramfs patcheval wrote for each boot (guest agent agent-1.2 as /init") {
		t.Errorf("qemu.txt: %q", q)
	}
	if g := file("guest.txt"); !strings.Contains(g, "full boot 2: kernel 6.1.0, agent agent-1.2, deterministic true") ||
		!regexp.MustCompile(`full boot 2: .* build-id 0{39}[1-9] \(verified against the built vmlinux\)\n`).MatchString(g) {
		t.Errorf("guest.txt: %q", g)
	}
	// Every sample names the kernel it ran on.
	if c := file("samples.csv"); !strings.HasPrefix(c, strings.Join(SamplesHeader, ",")+"\n") || !strings.Contains(c, ",true,"+fmt.Sprintf("%040x", 1)+"\n") {
		t.Errorf("samples.csv lacks the build-ids: %q", c)
	}
	rows, ok, err := Compare(strings.NewReader(file("samples.csv")), strings.NewReader(csvOf(t, samples)), 0)
	if err != nil || !ok || len(rows) != 4 {
		t.Errorf("samples.csv differs from the stored samples: %v %v %v", rows, ok, err)
	}
	script := file("repro.sh")
	for _, want := range []string{
		`"$PATCHEVAL" lore -m "$here/series.mbox" -v 4 --link-mask '' --pipeline "$here/pipeline.toml" --tree "$TREE" --base `,
		"--boots 2 --out",
		`export PATCHEVAL_CACHE_DIR="${PATCHEVAL_CACHE_DIR:-$work/cache}"`,
		`"$PATCHEVAL" repro --compare --tolerance 1 "$here/samples.csv" "$work/repro/samples.csv"`,
	} {
		if !strings.Contains(script, want) {
			t.Errorf("repro.sh lacks %q:\n%s", want, script)
		}
	}
	if out, err := exec.Command("sh", "-n", "-c", script).CombinedOutput(); err != nil {
		t.Errorf("repro.sh is not valid sh: %v\n%s", err, out)
	}
	var m Manifest
	if err := json.Unmarshal([]byte(file("manifest.json")), &m); err != nil || m.EvaluationID != id || len(m.Kernels) != 3 || len(m.Runs) != 8 || m.Samples != 8 {
		t.Errorf("manifest: %+v %v", m, err)
	}

	// Written as a directory (not over another one) and as a tar.gz.
	dir := filepath.Join(t.TempDir(), "repro")
	if err := r.WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "repro.sh")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("repro.sh: %v %v", fi, err)
	}
	if err := r.WriteDir(dir); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("writing over a reproducer: %v", err)
	}
	// Replace writes over an earlier reproducer, leaving nothing else.
	os.WriteFile(filepath.Join(dir, "stale.txt"), []byte("from an earlier run"), 0o644)
	if err := r.Replace(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "stale.txt")); err == nil {
		t.Error("Replace kept a file of the reproducer it replaced")
	}
	if b, err := os.ReadFile(filepath.Join(dir, "samples.csv")); err != nil || string(b) != file("samples.csv") {
		t.Errorf("replaced samples.csv: %v", err)
	}
	if ents, _ := os.ReadDir(filepath.Dir(dir)); len(ents) != 1 {
		t.Errorf("Replace left %d entries beside the reproducer, want none", len(ents)-1)
	}
	var tgz bytes.Buffer
	if err := r.WriteTarGz(&tgz, "patcheval-repro-1", time.Unix(1700000000, 0)); err != nil {
		t.Fatal(err)
	}
	got := untar(t, tgz.Bytes())
	if got["patcheval-repro-1/samples.csv"] != file("samples.csv") || got["patcheval-repro-1/kernels/full-ppc64le.config"] == "" {
		t.Errorf("tar.gz files: %v", keys(got))
	}

	// A build cache that lost a kernel: named as missing, not an error.
	builds, _ := st.BuildsOf(id)
	os.Remove(filepath.Join(builds[0].ArtifactDir, "config"))
	r2, err := Build(st, id, Options{})
	if err != nil || len(r2.Missing) != 1 || !strings.Contains(r2.Missing[0], "the build cache no longer has it") ||
		!strings.Contains(string(r2.File("README").Data), "Missing:") {
		t.Errorf("missing config: %v %v", r2.Missing, err)
	}
	// And one that lost a kernel's metadata.json: named as missing too,
	// and the runner's own row is not written as the build's metadata.
	os.Remove(filepath.Join(builds[1].ArtifactDir, "metadata.json"))
	r3, err := Build(st, id, Options{})
	if err != nil || len(r3.Missing) != 2 || !strings.Contains(r3.Missing[1], "metadata.json: the build cache no longer has the build's metadata") {
		t.Errorf("missing metadata: %v %v", r3.Missing, err)
	}
	for _, f := range r3.Files {
		var meta build.Metadata
		if strings.HasSuffix(f.Name, ".metadata.json") && (json.Unmarshal(f.Data, &meta) != nil || meta.Compiler.VersionFull == "") {
			t.Errorf("%s is the runner's row, not the build's metadata:\n%s", f.Name, f.Data)
		}
	}
	if _, err := Build(st, id+100, Options{}); err == nil {
		t.Error("an evaluation that does not exist")
	}
}

func TestCompare(t *testing.T) {
	a := "variant,boot,iteration,benchmark,metric,value\nv,0,0,kill,ns/op,100\nv,1,0,kill,ns/op,102\nw,0,0,kill,ns/op,50\n"
	for _, c := range []struct {
		b   string
		tol float64
		ok  bool
	}{
		{a, 0, true},
		{strings.Replace(a, "102", "103", 1), 1, true},  // mean 101 -> 101.5: +0.5%
		{strings.Replace(a, "102", "106", 1), 1, false}, // +2%
		{strings.Replace(a, "w,0,0,kill,ns/op,50\n", "", 1), 1, false},
		{a + "w,1,0,kill,ns/op,50\n", 1, false}, // another number of samples
	} {
		rows, ok, err := Compare(strings.NewReader(a), strings.NewReader(c.b), c.tol)
		if err != nil || ok != c.ok {
			t.Errorf("%q vs %q at %v%%: ok %v (%v), want %v", a, c.b, c.tol, ok, err, c.ok)
			for _, r := range rows {
				t.Log(r)
			}
		}
	}
	if _, _, err := Compare(strings.NewReader("x,y\n1,2\n"), strings.NewReader(a), 1); err == nil || !strings.Contains(err.Error(), `first samples.csv: no "variant" column`) {
		t.Errorf("bad header: %v", err)
	}
	if _, _, err := Compare(strings.NewReader(a), strings.NewReader(strings.Replace(a, "102", "fast", 1)), 1); err == nil || !strings.Contains(err.Error(), `second samples.csv:3: value "fast"`) {
		t.Errorf("bad value: %v", err)
	}
}

func csvOf(t *testing.T, s []evaluate.Sample) string {
	var b bytes.Buffer
	if err := WriteSamplesCSV(&b, s); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func names(r *Repro) []string {
	var out []string
	for _, f := range r.Files {
		out = append(out, f.Name)
	}
	return out
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func untar(t *testing.T, b []byte) map[string]string {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	out := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		if h.Typeflag == tar.TypeReg {
			out[h.Name] = string(data)
		}
	}
}
