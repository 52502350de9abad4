package build

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/patcheval/patcheval/build/kcc"
	"github.com/patcheval/patcheval/internal/lazyre"
	"github.com/patcheval/patcheval/internal/sandbox"
)

// verifyKCC recompiles up to n objects that kcc answered from its store in
// this build, with the real compiler and kbuild's own recorded command
// line, and requires byte-identical objects. It returns how many it
// compared. A difference is an infra error naming the object; its store
// entry is removed.
func (r *runner) verifyKCC(ctx context.Context, n int, logw io.Writer) (int, error) {
	type hit struct{ obj, key string }
	var hits []hit
	seen := map[string]bool{}
	f, err := openBelow(r.home, filepath.Base(r.statsLog()))
	if err != nil {
		return 0, nil // nothing was compiled
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		w := strings.Fields(sc.Text())
		// The log was written inside the build: only well-formed keys and
		// object paths inside O= are taken.
		if len(w) == 3 && w[0] == "hit" && !seen[w[1]] && kcc.ValidKey(w[2]) && filepath.IsLocal(w[1]) {
			seen[w[1]] = true
			hits = append(hits, hit{w[1], w[2]})
		}
	}
	f.Close()
	if len(hits) == 0 || n <= 0 {
		return 0, nil
	}
	sort.Slice(hits, func(i, j int) bool { return hits[i].obj < hits[j].obj })
	// Evenly spread over the tree, deterministic.
	var pick []hit
	for i := 0; i < n && i < len(hits); i++ {
		pick = append(pick, hits[i*len(hits)/min(n, len(hits))])
	}
	tmp := filepath.Join(r.home, "tmp")
	os.MkdirAll(tmp, 0o755)
	var env []string
	for _, e := range r.env() {
		if !strings.HasPrefix(e, "PATCHEVAL_KCC") {
			env = append(env, e)
		}
	}
	verified := 0
	for _, h := range pick {
		stored := kcc.Lookup(r.kccLayer, r.kccRead, h.key)
		if stored == "" {
			continue // trimmed since
		}
		want, err := readBelow(filepath.Dir(stored), filepath.Base(stored))
		if err != nil {
			continue // trimmed since
		}
		cmdline, err := recordedCommand(r.out, h.obj)
		if err != nil {
			return verified, &InfraError{Arch: r.arch.Name, Reason: "compiler cache", Msg: "verifying kcc: " + err.Error(), Err: err}
		}
		cmdline = strings.TrimPrefix(cmdline, r.kcc+" ")
		if i := strings.Index(cmdline, " ; "); i > 0 {
			cmdline = cmdline[:i]
		}
		ref := filepath.Join(tmp, "kcc-verify.o")
		cmdline = strings.Replace(cmdline, " -o "+h.obj+" ", " -o "+ref+" ", 1)
		cmdline = depArg.ReplaceAllString(cmdline, "-Wp,-MMD,"+filepath.Join(tmp, "kcc-verify.d"))
		if !strings.Contains(cmdline, ref) {
			return verified, &InfraError{Arch: r.arch.Name, Reason: "compiler cache", Msg: "verifying kcc: no -o " + h.obj + " in its recorded command"}
		}
		// The recorded command is the tree's text: it runs sandboxed like
		// make did.
		cmd, err := r.command(ctx, []string{"sh", "-c", cmdline}, env)
		if err != nil {
			return verified, err
		}
		out, err := cmd.CombinedOutput()
		if merr := sandbox.Release(cmd); merr != nil && err == nil {
			err = merr
		}
		if err != nil {
			return verified, &InfraError{Arch: r.arch.Name, Reason: "compiler cache",
				Msg: fmt.Sprintf("verifying kcc: compiling %s directly failed: %v: %s", h.obj, err, firstLines(out, 5)), Err: err}
		}
		got, err := readBelow(tmp, filepath.Base(ref))
		os.Remove(ref)
		if err != nil {
			return verified, &InfraError{Arch: r.arch.Name, Reason: "compiler cache", Msg: "verifying kcc: " + err.Error(), Err: err}
		}
		if !bytes.Equal(got, want) {
			os.Remove(stored)
			return verified, &InfraError{Arch: r.arch.Name, Reason: "compiler cache",
				Msg: fmt.Sprintf("kcc answered %s with an object that differs from the compiler's own (store entry %s removed): rebuild with --compiler-cache=none and report this", h.obj, h.key)}
		}
		verified++
	}
	fmt.Fprintf(logw, "# kcc: %d of %d objects answered from the store recompiled directly: identical\n", verified, len(hits))
	return verified, nil
}

var depArg = lazyre.New(`-Wp,-MM?D,\S+`)

// recordedCommand reads kbuild's saved command for obj (relative to the
// O= directory) from its .cmd file.
func recordedCommand(out, obj string) (string, error) {
	p := filepath.Join(out, filepath.Dir(obj), "."+filepath.Base(obj)+".cmd")
	f, err := openBelow(out, filepath.Join(filepath.Dir(obj), "."+filepath.Base(obj)+".cmd"))
	if err != nil {
		return "", err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	line, err := br.ReadString('\n')
	if err != nil && line == "" {
		return "", fmt.Errorf("%s: %v", p, err)
	}
	for _, prefix := range []string{"cmd_" + obj + " := ", "savedcmd_" + obj + " := "} {
		if strings.HasPrefix(line, prefix) {
			return strings.TrimSpace(line[len(prefix):]), nil
		}
	}
	return "", fmt.Errorf("%s: no saved command for %s", p, obj)
}

func firstLines(b []byte, n int) string {
	ls := strings.SplitN(strings.TrimSpace(string(b)), "\n", n+1)
	if len(ls) > n {
		ls = ls[:n]
	}
	return strings.Join(ls, " | ")
}
