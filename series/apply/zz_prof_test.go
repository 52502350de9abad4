package apply

import (
	"context"
	"os"
	"testing"
)

func TestZZProfCheckout(t *testing.T) {
	tree := os.Getenv("H3_TREE")
	if tree == "" {
		t.Skip()
	}
	dir := t.TempDir() + "/co"
	st, err := Checkout(context.Background(), tree, "v6.1-debian", dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(st)
}
