package runner

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/patcheval/patcheval/build/buildtest"
	"github.com/patcheval/patcheval/internal/testenv"
	"github.com/patcheval/patcheval/pipelines"
)

// TestResolvedHandedToSubmit: a series an entry point resolved (Resolve)
// and handed to Submit (Options.Resolved) is what Submit stores, byte for
// byte the series it stores when it resolves the thread itself, and
// neither Check nor Submit resolves the thread again: the newest version
// resolved and then pinned (the service), the version asked for (lore,
// the follower), the newest left unpinned (a watch), a pipeline that does
// not apply the series. A series resolved from another thread, sender
// rule or version is not taken: Submit resolves the thread, as it does
// when it is given only the mbox.
func TestResolvedHandedToSubmit(t *testing.T) {
	repo := buildtest.Repo(t)
	p := builtin(t, "ppc-preempt-dynamic")
	thread := backportMbox(t)
	other, err := os.ReadFile(filepath.Join(testenv.ThreadsDir(), "ppc-dynamic-preempt-v4.mbox"))
	if err != nil {
		t.Fatal(err)
	}
	noSeries := *p
	noSeries.Variants = append(noSeries.Variants[:0:0], p.Variants...)
	for i := range noSeries.Variants {
		noSeries.Variants[i].ApplySeries = false
	}
	ctx := context.Background()
	resolves := countResolves(t)
	// submit submits o in a database of its own: the series stored and
	// the resolutions Check and Submit made.
	submit := func(name string, p *pipelines.Pipeline, o Options) ([]byte, int) {
		t.Helper()
		before := *resolves
		if err := Check(p, o); err != nil {
			t.Fatalf("%s: check: %v", name, err)
		}
		env := stageEnv(t, filepath.Join(t.TempDir(), "patcheval.db"))
		id, _, err := Submit(ctx, env, p, o)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		data, err := env.Store.ResolvedSeries(id)
		if err != nil || len(data) == 0 {
			t.Fatalf("%s: stored series %d bytes, %v", name, len(data), err)
		}
		return data, *resolves - before
	}
	resolve := func(o Options) *Resolved {
		t.Helper()
		before := *resolves
		r, err := Resolve(ctx, o)
		if err != nil || r.Series() == nil {
			t.Fatalf("resolve: %v", err)
		}
		if n := *resolves - before; n != 1 {
			t.Fatalf("Resolve resolved %d times", n)
		}
		return r
	}
	base := Options{Mbox: thread, Tree: repo, Boots: 1}
	with := func(o Options, r *Resolved) Options { o.Resolved = r; return o }
	pinned := base
	pinned.Version = 4

	// What Submit stores from the mbox alone: Check and Submit resolve
	// it (an entry point that resolved it too made that three).
	wantPinned, n := submit("pinned, mbox only", p, pinned)
	if n != 2 {
		t.Errorf("Check and Submit of the mbox alone resolved %d times, want 2 (each its own)", n)
	}
	wantNewest, _ := submit("newest, mbox only", p, base)
	wantNoSeries, _ := submit("no series applied, mbox only", &noSeries, base)
	if bytes.Equal(wantPinned, wantNewest) {
		t.Fatal("the pinned series says why it was chosen as the newest does")
	}

	for _, c := range []struct {
		name string
		p    *pipelines.Pipeline
		o    Options
		want []byte
	}{
		{"newest resolved, then pinned (the service)", p, with(pinned, resolve(base)), wantPinned},
		{"the version asked for (lore, the follower)", p, with(pinned, resolve(pinned)), wantPinned},
		{"newest, unpinned (a watch)", p, with(base, resolve(base)), wantNewest},
		{"a pipeline that does not apply the series", &noSeries, with(base, resolve(base)), wantNoSeries},
	} {
		got, n := submit(c.name, c.p, c.o)
		if n != 0 {
			t.Errorf("%s: Check and Submit resolved the handed series' thread %d times again", c.name, n)
		}
		if !bytes.Equal(got, c.want) {
			t.Errorf("%s: stored series differs from the one Submit resolves:\n%.300s\nvs\n%.300s", c.name, got, c.want)
		}
	}

	anySender := base
	anySender.AnySender = true
	otherThread := base
	otherThread.Mbox = other
	otherSource := base
	otherSource.ThreadSource = "elsewhere.mbox"
	for _, c := range []struct {
		name string
		o    Options
		want []byte
	}{
		{"another sender rule", with(pinned, resolve(anySender)), wantPinned},
		{"another thread", with(pinned, resolve(otherThread)), wantPinned},
		{"another source", with(pinned, resolve(otherSource)), wantPinned},
		{"a version asked for, submitted unpinned", with(base, resolve(pinned)), wantNewest},
	} {
		got, n := submit(c.name, p, c.o)
		if n != 2 {
			t.Errorf("%s: Check and Submit resolved %d times, want 2 (the handed series is not theirs)", c.name, n)
		}
		if !bytes.Equal(got, c.want) {
			t.Errorf("%s: stored series differs from the one Submit resolves:\n%.300s\nvs\n%.300s", c.name, got, c.want)
		}
	}

	// Nothing to parse: the error a thread without messages gets.
	if _, err := Resolve(ctx, Options{ThreadSource: "empty.mbox"}); err == nil || err.Error() != "empty.mbox: no messages" {
		t.Errorf("no mbox: %v", err)
	}
}
