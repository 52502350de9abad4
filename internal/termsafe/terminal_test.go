package termsafe_test

import (
	"bytes"
	"os"
	"testing"

	"github.com/patcheval/patcheval/internal/termsafe"
	"github.com/patcheval/patcheval/internal/termsafe/ptytest"
)

func TestTerminal(t *testing.T) {
	term, _ := ptytest.Open(t)
	if !termsafe.Terminal(term) {
		t.Errorf("a pty is not a terminal")
	}
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	if termsafe.Terminal(null) || termsafe.Terminal(&bytes.Buffer{}) {
		t.Errorf("/dev/null or a buffer taken for a terminal")
	}
}
