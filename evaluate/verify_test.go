package evaluate

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/evaluate/guest"
	"github.com/patcheval/patcheval/internal/fail"
)

// fixedTarget "boots" by returning the same agent output every time: a
// machine that runs one kernel whatever it is asked.
type fixedTarget struct{ info guest.Info }

func (f fixedTarget) Name() string { return "fixed" }

func (f fixedTarget) Boot(ctx context.Context, k Kernel, p guest.Plan) (*BootResult, error) {
	info := f.info
	return &BootResult{Output: &guest.Output{Info: &info, Done: true, OK: true,
		Results: []guest.Result{{Benchmark: "kill", NsPerOp: 100, OpsPerSec: 1e7, Iterations: 1000}}}}, nil
}

const (
	idA = "1111111111111111111111111111111111111111"
	idB = "2222222222222222222222222222222222222222"
)

// TestBootVerifiesKernel: a boot whose machine shows another build-id
// or lacks the variant's command line is an infra error naming both, with
// no sample; the right kernel gives samples that carry its build-id.
func TestBootVerifiesKernel(t *testing.T) {
	running := guest.Info{Release: "6.1.0", BuildID: idA, Cmdline: "console=ttyS0 preempt=full"}
	for _, c := range []struct {
		name    string
		k       Kernel
		wantErr string
	}{
		{"right kernel", Kernel{Variant: "a", BuildID: idA, Cmdline: "preempt=full"}, ""},
		{"unknown build-id", Kernel{Variant: "a", Cmdline: "preempt=full"}, ""},
		{"other build-id", Kernel{Variant: "b", BuildID: idB, Image: "/x/bzImage"}, "build-id " + idA + " (release 6.1.0) is running, want " + idB + " (/x/bzImage)"},
		{"other cmdline", Kernel{Variant: "a", BuildID: idA, Cmdline: "preempt=none"}, `"console=ttyS0 preempt=full" lacks preempt=none`},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := Boot(context.Background(), fixedTarget{running}, PlannedBoot{Key: BootKey{Variant: c.k.Variant}, Kernel: c.k})
			if c.wantErr == "" {
				if rec.Err != nil || len(rec.Samples) == 0 {
					t.Fatalf("err %v, %d samples", rec.Err, len(rec.Samples))
				}
				for _, s := range rec.Samples {
					if s.BuildID != idA {
						t.Errorf("sample build-id %q", s.BuildID)
					}
				}
				if rec.Result.Env.BuildID != idA || rec.Result.Env.Verified != (c.k.BuildID != "") {
					t.Errorf("env %+v", rec.Result.Env)
				}
				return
			}
			var be *BootError
			if !errors.As(rec.Err, &be) || be.Phase != PhaseWrongKernel || fail.KindOf(rec.Err) != fail.KindInfra {
				t.Fatalf("err %v", rec.Err)
			}
			if !strings.Contains(be.Msg, c.wantErr) {
				t.Errorf("message %q lacks %q", be.Msg, c.wantErr)
			}
			if len(rec.Samples) != 0 {
				t.Errorf("%d samples recorded from the wrong kernel", len(rec.Samples))
			}
		})
	}
	if _, err := Verify(Kernel{Variant: "a", BuildID: idA}, &guest.Info{Release: "6.1.0"}); err == nil || !strings.Contains(err.Error(), "shows no build-id") {
		t.Errorf("no build-id shown: %v", err)
	}
}
