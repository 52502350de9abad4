package apply

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/internal/testenv"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/series"
)

// TestApplyRCUAlreadyIn72: the rcu-gp-qs series ("[PATCH v2] rcu: Reduce
// synchronize_rcu() latency ...") was merged before 7.2: on Debian's
// 7.2.13 apply says so, patch by patch, instead of "does not apply".
func TestApplyRCUAlreadyIn72(t *testing.T) {
	repo := cloneBare(t, testenv.LinuxRelease(t, "7.2.13"))
	data, err := os.ReadFile(filepath.Join(testenv.ThreadsDir(), "rcu-gp-qs-v2.mbox"))
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := mbox.ParseBytes(data, "rcu-gp-qs-v2.mbox")
	if err != nil {
		t.Fatal(err)
	}
	s, err := series.Resolve(mbox.NewThread(msgs, "rcu-gp-qs-v2.mbox"), series.Options{})
	if err != nil {
		t.Fatal(err)
	}
	opt := pinned("patcheval/rcu-gp-qs")
	opt.Base = "v7.2.13"
	_, err = Apply(context.Background(), repo, FromSeries(s, series.DefaultAMOptions()), opt)
	t.Logf("%v", err)
	var ae *AlreadyError
	if !errors.As(err, &ae) || len(ae.Patches) != len(s.Patches) ||
		!strings.HasPrefix(err.Error(), "1/1 is already in v7.2.13: the reverse applies cleanly (") {
		t.Fatalf("Apply on v7.2.13: %v, want every patch already in", err)
	}
}
