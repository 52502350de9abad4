package store

import (
	"context"
	"testing"
)

// TestApplyFailure: an evaluation's apply failure is stored and read back
// field for field on both databases, replaced by a second record, and
// dropped once the series applies.
func TestApplyFailure(t *testing.T) {
	eachDB(t, func(t *testing.T, db string) {
		s, _ := openTemp(t, db)
		e, _, err := s.CreateOrResumeEvaluation("k", EvaluationMeta{Pipeline: "p"})
		if err != nil {
			t.Fatal(err)
		}
		if f, err := s.ApplyFailureOf(e.ID); err != nil || f != nil {
			t.Fatalf("before: %+v %v", f, err)
		}
		want := ApplyFailure{EvaluationID: e.ID, Patch: 2, Total: 3, Label: "2/3 x: y", MessageID: "a@b", Applied: 1,
			File: "lib/x.c", Hunk: 1, HunkHeader: "@@ -7,7 +7,7 @@", Reason: "hunk #1 does not apply\n  |line 7",
			ErrorKind: "failed", Tree: "/srv/linux.git", Base: "0123456789abcdef0123456789abcdef01234567",
			BaseSubject: "Linux 6.1", BaseReason: "--base v6.1", ThreeWay: "conflict", Reply: `{"subject":"Re: x"}`}
		if err := s.RecordApplyFailure(want); err != nil {
			t.Fatal(err)
		}
		got, err := s.ApplyFailureOf(e.ID)
		if err != nil || got == nil || got.Created.IsZero() {
			t.Fatalf("got %+v %v", got, err)
		}
		got.Created = want.Created
		if *got != want {
			t.Errorf("got  %+v\nwant %+v", *got, want)
		}
		want.Patch, want.Reply = 3, ""
		if err := s.RecordApplyFailure(want); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.ApplyFailureOf(e.ID); got == nil || got.Patch != 3 || got.Reply != "" {
			t.Errorf("replaced: %+v", got)
		}
		if err := s.Tx(context.Background(), func(tx *Tx) error {
			return s.RecordAppliedTx(tx, e.ID, Applied{Head: "c", Branch: "b"})
		}); err != nil {
			t.Fatal(err)
		}
		if got, err := s.ApplyFailureOf(e.ID); err != nil || got != nil {
			t.Errorf("after the series applied: %+v %v", got, err)
		}
	})
}
