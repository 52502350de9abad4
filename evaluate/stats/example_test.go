package stats_test

import (
	"fmt"

	"github.com/patcheval/patcheval/evaluate/stats"
)

// The Config A/B experiment of the seed thread, in deterministic QEMU:
// kill(self, 0) in ns/op, three boots each.
func ExampleCompare() {
	voluntary := []float64{955.1, 954.6, 955.9}
	dynamic := []float64{1192.4, 1191.8, 1193.1}
	c := stats.Compare(voluntary, dynamic, false, 0.05)
	fmt.Printf("%+.1f%% [%+.1f%%, %+.1f%%] %s\n", c.Change, c.CILow, c.CIHigh, c.Verdict)
	fmt.Println(c.Reason)
	// Output:
	// +24.8% [+24.7%, +25.0%] regression
	// Welch p < 0.001 and the 95% CI [+24.66%, +25.02%] excludes 0
}

// The seed thread's split of the kill regression (bogo-ops/s): voluntary
// -> lazy -> full+PREEMPT_RCU, "roughly 55/45".
func ExampleDecompose() {
	d, _ := stats.Decompose([]string{"voluntary", "lazy", "full"},
		map[string]float64{"voluntary": 105014, "lazy": 86878, "full": 73317})
	for _, s := range d.Steps {
		fmt.Printf("%s -> %s: %+.1f%%, share %.0f%% (linear %.0f%%)\n", s.From, s.To, s.Change, s.Share, s.LinearShare)
	}
	// Output:
	// voluntary -> lazy: -17.3%, share 53% (linear 57%)
	// lazy -> full: -15.6%, share 47% (linear 43%)
}

func ExampleNeedMore() {
	more, why := stats.NeedMore([]float64{955.1, 954.6, 955.9}, []float64{1192.4, 1191.8, 1193.1},
		stats.AdaptiveOptions{MinN: 3, MaxN: 10})
	fmt.Println(more, why)
	// Output:
	// false clear at n=3: regression, Welch p < 0.001 and the 99.375% CI [+24.49%, +25.18%] excludes 0 (interim alpha 0.00625 = 0.05/8 looks)
}
