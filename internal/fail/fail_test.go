package fail

import (
	"errors"
	"fmt"
	"testing"
)

type selfClassified struct{}

func (selfClassified) Error() string  { return "self" }
func (selfClassified) FailKind() Kind { return KindInput }

func TestKindOf(t *testing.T) {
	panicked := Failedf("booting a: kernel-panic")
	for _, c := range []struct {
		name string
		err  error
		want Kind
	}{
		{"plain", errors.New("x"), KindInfra},
		{"wrapped", fmt.Errorf("ctx: %w", Inputf("bad")), KindInput},
		{"self-classified", fmt.Errorf("ctx: %w", selfClassified{}), KindInput},
		// run --keep-going joins the failed boots: exit 1, not 3.
		{"join of failed", errors.Join(panicked, Failedf("booting b: kernel-hang")), KindFailed},
		{"wrapped join", fmt.Errorf("run: %w", errors.Join(errors.New("plain"), panicked)), KindFailed},
		{"join of plain", errors.Join(errors.New("a"), errors.New("b")), KindInfra},
		{"outer wins", Inputf("outer: %w", errors.Join(panicked)), KindInput},
	} {
		if got := KindOf(c.err); got != c.want {
			t.Errorf("%s: KindOf = %v, want %v", c.name, got, c.want)
		}
	}
	if Code(errors.Join(panicked)) != 1 {
		t.Errorf("Code of a join of failures = %d, want 1", Code(errors.Join(panicked)))
	}
}
