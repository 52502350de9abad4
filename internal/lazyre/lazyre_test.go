package lazyre

import (
	"sync"
	"testing"
)

// Nothing is compiled until first use; then every goroutine sees the one
// compiled expression, with regexp's answers.
func TestCompiledOnFirstUse(t *testing.T) {
	r := New(`^v(\d+)$`)
	if r.re != nil || r.String() != `^v(\d+)$` || r.re != nil {
		t.Fatal("compiled before first use")
	}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if m := r.FindStringSubmatch("v12"); len(m) != 2 || m[1] != "12" {
				t.Errorf("FindStringSubmatch: %q", m)
			}
		}()
	}
	wg.Wait()
	if r.re == nil || r.Re() != r.re || !r.MatchString("v1") || r.ReplaceAllString("v7", "w$1") != "w7" {
		t.Error("after first use")
	}
	bad := New(`(`)
	defer func() {
		if recover() == nil {
			t.Error("a bad expression did not panic on first use")
		}
	}()
	bad.MatchString("x")
}

func TestCompileAll(t *testing.T) {
	New(`[`)
	if _, err := CompileAll(); err == nil {
		t.Error("a bad expression passed CompileAll")
	}
}
