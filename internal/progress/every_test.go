package progress

import (
	"sync/atomic"
	"testing"
	"time"
)

// Every calls f on its interval, and never after stop has returned.
func TestEvery(t *testing.T) {
	var n atomic.Int32
	stop := Every(5*time.Millisecond, func() { n.Add(1); time.Sleep(2 * time.Millisecond) })
	deadline := time.Now().Add(5 * time.Second)
	for n.Load() < 3 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	stop()
	stop() // twice is fine
	got := n.Load()
	if got < 3 {
		t.Fatalf("f ran %d times in 5 s at a 5 ms interval", got)
	}
	time.Sleep(30 * time.Millisecond)
	if n.Load() != got {
		t.Errorf("f ran after stop returned (%d -> %d)", got, n.Load())
	}
}
