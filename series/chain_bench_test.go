package series

import (
	"bytes"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/patcheval/patcheval/mbox"
)

// chainMbox is a patch followed by n-1 replies, each answering the one
// before and carrying a Reviewed-by: a reply chain as deep as it is long
// (the hostile submission of issue 35).
func chainMbox(n int) []byte {
	var b bytes.Buffer
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "From mboxrd@z Thu Jan  1 00:00:00 1970\nFrom: A <a@example.org>\nSubject: %s\nDate: Mon, 5 Jan 2026 %02d:%02d:%02d +0000\nMessage-ID: <c%d@example.org>\n",
			map[bool]string{true: "[PATCH] gen: change", false: "Re: [PATCH] gen: change"}[i == 0], (i/3600)%24, (i/60)%60, i%60, i)
		if i > 0 {
			fmt.Fprintf(&b, "In-Reply-To: <c%d@example.org>\nReferences: <c0@example.org> <c%d@example.org>\n", i-1, i-1)
		}
		b.WriteString("\n")
		if i == 0 {
			b.WriteString("Change.\n\nSigned-off-by: A <a@example.org>\n---\n f.c | 2 +-\n\ndiff --git a/f.c b/f.c\nindex 1111111..2222222 100644\n--- a/f.c\n+++ b/f.c\n@@ -1,3 +1,3 @@\n a\n-b\n+c\n d\n")
		} else {
			b.WriteString("Fine.\n\nReviewed-by: A <a@example.org>\n")
		}
		b.WriteString("\n")
	}
	return b.Bytes()
}

// BenchmarkResolveChain parses, links and resolves reply chains of 8k,
// 16k and 100k messages (the whole of what serve does with a submitted
// mbox before queueing it). Target: the 100k chain in a few seconds at
// most, growing linearly.
func BenchmarkResolveChain(b *testing.B) {
	for _, n := range []int{8000, 16000, 50000, 100000} {
		b.Run(fmt.Sprintf("%dk", n/1000), func(b *testing.B) {
			data := chainMbox(n)
			b.SetBytes(int64(len(data)))
			cpu0 := cpuTime()
			for b.Loop() {
				ms, err := mbox.ParseBytes(data, "chain")
				if err != nil {
					b.Fatal(err)
				}
				s, err := Resolve(mbox.NewThread(ms, "chain"), Options{})
				if err != nil || len(s.Patches) != 1 || len(s.Patches[0].Trailers) != n {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// cpuTime is the process's user plus system CPU time (cpu-ns/op is not
// inflated by a loaded machine the way ns/op is).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
