package store

import (
	"context"
	"reflect"
	"testing"
)

// TestListByTreeAndArch: List selects by tree (exact) and by arch (an
// evaluation with a build on that arch), alone, together and with the
// pipeline; the counts follow; an unknown value selects nothing; Choices
// lists the pipelines, trees and arches the store holds, sorted.
func TestListByTreeAndArch(t *testing.T) {
	eachDB(t, func(t *testing.T, db string) {
		s, _ := openTemp(t, db)
		ctx := context.Background()
		mk := func(key, pipeline, tree string, arches ...string) int64 {
			e, _, err := s.CreateOrResumeEvaluation(key, EvaluationMeta{Pipeline: pipeline, Tree: tree, SeriesTitle: key})
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range arches {
				if _, err := s.RecordBuild(e.ID, Build{Variant: "v", Arch: a, Status: "ok"}); err != nil {
					t.Fatal(err)
				}
			}
			return e.ID
		}
		a := mk("a", "p", "/srv/linux.git", "x86_64")
		b := mk("b", "p", "/srv/linux.git", "ppc64le", "x86_64")
		c := mk("c", "q", "/srv/next.git", "ppc64le")
		d := mk("d", "p", "/srv/next.git") // queued: no build yet
		for _, tc := range []struct {
			f    ListFilter
			want []int64
		}{
			{ListFilter{Tree: "/srv/linux.git"}, []int64{b, a}},
			{ListFilter{Tree: "/srv/next.git"}, []int64{d, c}},
			{ListFilter{Arch: "ppc64le"}, []int64{c, b}},
			{ListFilter{Arch: "x86_64", Tree: "/srv/linux.git"}, []int64{b, a}},
			{ListFilter{Arch: "ppc64le", Tree: "/srv/next.git", Pipeline: "q"}, []int64{c}},
			{ListFilter{Arch: "ppc64le", Tree: "/srv/next.git", Pipeline: "p"}, nil},
			{ListFilter{Tree: "/srv/nope.git"}, nil},
			{ListFilter{Arch: "riscv64"}, nil},
			{ListFilter{Arch: "x86_64", Limit: 1, Offset: 1}, []int64{a}},
		} {
			evs, total, err := s.List(ctx, tc.f)
			if err != nil {
				t.Fatalf("List(%+v): %v", tc.f, err)
			}
			var got []int64
			for _, e := range evs {
				got = append(got, e.ID)
			}
			wantTotal := len(tc.want)
			if tc.f.Limit > 0 {
				wantTotal = 2
			}
			if !reflect.DeepEqual(got, tc.want) || total != wantTotal {
				t.Errorf("List(%+v) = %v of %d, want %v of %d", tc.f, got, total, tc.want, wantTotal)
			}
		}
		ch, err := s.Choices(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := ListChoices{Pipelines: []string{"p", "q"}, Trees: []string{"/srv/linux.git", "/srv/next.git"}, Arches: []string{"ppc64le", "x86_64"}}
		if !reflect.DeepEqual(ch, want) {
			t.Errorf("Choices = %+v, want %+v", ch, want)
		}
	})
}
