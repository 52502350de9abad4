package service

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/runner"
	"github.com/patcheval/patcheval/pipelines/store"
)

// TestReproDownload: the dashboard offers a stored evaluation's
// reproducer, served as a tar.gz of pipelines/experiments/repro's files.
func TestReproDownload(t *testing.T) {
	s, base := testService(t, Config{})
	tree := gitRepo(t, filepath.Join(t.TempDir(), "tree"))
	p, err := pipelines.Find("selinux-tax")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(backport)
	if err != nil {
		t.Fatal(err)
	}
	id, _, err := runner.Submit(context.Background(), runner.Env{Store: s.Store()}, p, runner.Options{Mbox: data, Tree: tree, Base: "HEAD"})
	if err != nil {
		t.Fatal(err)
	}
	run, _ := s.Store().BeginRun(id, "selinux-off", 0)
	if err := s.Store().FinishRun(run, store.RunOK, evaluate.Environment{Target: "qemu", QEMUArgs: []string{"qemu-system-x86_64", "-icount", "shift=0"}}, nil,
		[]evaluate.Sample{{Variant: "selinux-off", Benchmark: "kill", Metric: "ns/op", Value: 900}}); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(base + "/evaluations/" + itoa(id))
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	link := "/api/v1/evaluations/" + itoa(id) + "/repro.tar.gz"
	if !strings.Contains(string(page), `href="`+link+`"`) {
		t.Errorf("the evaluation page has no link to %s", link)
	}
	resp, err = http.Get(base + link)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/gzip" ||
		!strings.Contains(resp.Header.Get("Content-Disposition"), "patcheval-repro-"+itoa(id)+".tar.gz") {
		t.Fatalf("GET %s: %d %v", link, resp.StatusCode, resp.Header)
	}
	gz, err := gzip.NewReader(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		files[h.Name] = string(b)
	}
	dir := "patcheval-repro-" + itoa(id) + "/"
	if !strings.Contains(files[dir+"qemu.txt"], "qemu-system-x86_64 -icount shift=0") || !strings.Contains(files[dir+"samples.csv"], "selinux-off,0,0,kill,ns/op,900") ||
		!strings.Contains(files[dir+"repro.sh"], `--pipeline "$here/pipeline.toml"`) || files[dir+"series.mbox"] == "" {
		var names []string
		for n := range files {
			names = append(names, n)
		}
		t.Errorf("tar.gz: %v\nrepro.sh:\n%s", names, files[dir+"repro.sh"])
	}
	if code, e, raw := call(t, "GET", base+"/api/v1/evaluations/999/repro.tar.gz", "", nil); code != 404 || e.Field != "id" {
		t.Errorf("unknown evaluation: %d %s", code, raw)
	}
	// The report stage writes it beside the reports too.
	s.writeRepro(id)
	if b, err := os.ReadFile(filepath.Join(s.OutDir(id), "repro", "samples.csv")); err != nil || !strings.Contains(string(b), "selinux-off,0,0,kill,ns/op,900") {
		t.Errorf("repro/ beside the reports: %v %q", err, b)
	}
}
