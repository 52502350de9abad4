package mbox

import (
	"fmt"
	"syscall"
	"testing"
	"time"
)

// chainMessages builds n messages where each replies to the one before
// (In-Reply-To, and References naming the root and the parent, as a mail
// client that trims References writes): the shape of the hostile
// submission in issue 35, a reply chain as deep as it is long.
func chainMessages(n int) []*Message {
	base := time.Date(2026, 7, 27, 9, 0, 0, 0, time.UTC)
	ms := make([]*Message, n)
	for i := range ms {
		m := &Message{
			MessageID: fmt.Sprintf("chain-%06d@example.org", i),
			Subject:   "Re: [PATCH] x",
			Date:      base.Add(time.Duration(i) * time.Second),
		}
		if i == 0 {
			m.Subject = "[PATCH] x"
		} else {
			m.InReplyTo = ms[i-1].MessageID
			m.References = []string{ms[0].MessageID, ms[i-1].MessageID}
		}
		ms[i] = m
	}
	return ms
}

// BenchmarkThreadChain links reply chains of 8k, 16k and 100k messages
// (NewThread only; the messages are built in memory). Target: the 100k
// chain well under a second per op (issue 35: it took over 847 s).
// cpu-ns/op is the process's user+system CPU time per op, which a loaded
// machine does not inflate the way it does ns/op.
func BenchmarkThreadChain(b *testing.B) {
	for _, n := range []int{8000, 16000, 100000} {
		b.Run(fmt.Sprintf("%dk", n/1000), func(b *testing.B) {
			ms := chainMessages(n)
			b.ReportAllocs()
			cpu0 := cpuTime()
			for b.Loop() {
				t := NewThread(ms, "chain")
				if len(t.Roots) != 1 || t.Parent(ms[n-1]) != ms[n-2] {
					b.Fatalf("%d roots", len(t.Roots))
				}
			}
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// cpuTime is the process's user plus system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
