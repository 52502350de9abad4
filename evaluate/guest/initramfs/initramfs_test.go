package initramfs

import (
	"bytes"
	"compress/gzip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestCpioRoundTrip(t *testing.T) {
	if _, err := exec.LookPath("cpio"); err != nil {
		t.Fatal("cpio(1) is needed for this test (apt-get install cpio)")
	}
	init := bytes.Repeat([]byte("\x7fELF agent"), 1001) // odd length: padding
	plan := []byte(`{"benchmarks":[{"name":"kill"}]}`)
	for _, gz := range []bool{false, true} {
		var buf bytes.Buffer
		if err := Write(&buf, Spec{Init: init, Files: map[string][]byte{"patcheval/plan.json": plan}, Gzip: gz}); err != nil {
			t.Fatal(err)
		}
		raw := buf.Bytes()
		if gz {
			zr, err := gzip.NewReader(&buf)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			out.ReadFrom(zr)
			raw = out.Bytes()
		}
		if len(raw)%512 != 0 {
			t.Errorf("archive length %d not a multiple of 512", len(raw))
		}
		cmd := exec.Command("cpio", "-t", "-v", "--quiet")
		cmd.Stdin = bytes.NewReader(raw)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("cpio -t: %v\n%s", err, out)
		}
		list := string(out)
		for _, want := range []string{"init", "dev/console", "dev/null", "proc", "sys", "patcheval", "patcheval/plan.json"} {
			found := false
			for _, l := range strings.Split(list, "\n") {
				f := strings.Fields(l)
				if len(f) > 0 && f[len(f)-1] == want {
					found = true
					if want == "dev/console" && !strings.HasPrefix(l, "crw-------") {
						t.Errorf("dev/console is not a char device: %s", l)
					}
					if want == "init" && !strings.HasPrefix(l, "-rwxr-xr-x") {
						t.Errorf("init mode: %s", l)
					}
				}
			}
			if !found {
				t.Errorf("cpio -t lacks %s:\n%s", want, list)
			}
		}
		// Extract and compare contents.
		dir := t.TempDir()
		cmd = exec.Command("cpio", "-i", "-d", "--quiet", "--no-absolute-filenames", "--nonmatching", "dev/*")
		cmd.Dir = dir
		cmd.Stdin = bytes.NewReader(raw)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("cpio -i: %v\n%s", err, out)
		}
		got, _ := os.ReadFile(filepath.Join(dir, "init"))
		if !bytes.Equal(got, init) {
			t.Errorf("init differs after round trip (%d vs %d bytes)", len(got), len(init))
		}
		got, _ = os.ReadFile(filepath.Join(dir, "patcheval/plan.json"))
		if !bytes.Equal(got, plan) {
			t.Errorf("plan = %q", got)
		}
	}
}

func TestDeterministic(t *testing.T) {
	var a, b bytes.Buffer
	spec := Spec{Init: []byte("x"), Files: map[string][]byte{"b": nil, "a/c": []byte("1")}, Gzip: true}
	Write(&a, spec)
	Write(&b, spec)
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("same spec, different archives")
	}
}
