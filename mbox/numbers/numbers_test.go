package numbers

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/patcheval/patcheval/mbox"
)

func readThread(t testing.TB, name string) []Number {
	t.Helper()
	path := filepath.Join("..", "testdata", "threads", name)
	return Read(mbox.NewThread(parseMbox(t, path), path))
}

// parseMbox parses the mailbox at path.
func parseMbox(t testing.TB, path string) []*mbox.Message {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := mbox.ParseBytes(data, path)
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

// find returns the numbers whose String() is s.
func find(ns []Number, s string) []Number {
	var out []Number
	for _, n := range ns {
		if n.String() == s {
			out = append(out, n)
		}
	}
	return out
}

func strs(ns []Number) string {
	var b strings.Builder
	for _, n := range ns {
		b.WriteString(n.String() + "\n")
	}
	return b.String()
}

// TestSeedThreads reads the seed threads' tables: each want line is one
// Number (by String), with the author, quoting and line it came from.
func TestSeedThreads(t *testing.T) {
	type want struct {
		s, author string
		quoted    bool
		line      int
		msgid     string // prefix
		platform  string
		tool      string
	}
	for _, c := range []struct {
		file  string
		total int
		want  []want
	}{
		{"ppc-dynamic-preempt-v4.mbox", 30, []want{
			// Seed 000: the bisection table, its "---" artefact and the
			// misaligned 6.16 row.
			{s: "kill bogo-ops/sec [6.15-rc6 (eln148)] 103,207", author: "Jirka Hladky", line: 13, msgid: "20260727000300", platform: "POWER10", tool: "stress-ng"},
			{s: "kill bogo-ops/sec [6.16 (eln150)] 70,281 (-32%)", author: "Jirka Hladky", line: 14, platform: "POWER10", tool: "stress-ng"},
			{s: "kill bogo-ops/sec [6.18 (eln154)] 72,552 (-30%)", author: "Jirka Hladky", line: 15},
			// Headerless rows continue the table above; the row names the machine.
			{s: "kill bogo-ops/sec [7.2 x86_64] 36,392 (-2.8%)", author: "Jirka Hladky", line: 21, platform: "x86_64"},
			// A perf profile: unsigned percentages are values.
			{s: "[avc_lookup, 6.16 (PREEMPT_RCU)] 24.79%", line: 28},
			// The SELinux table with a "vs enforcing" column.
			{s: "kill bogo-ops/sec [Permissive] 70,248 (+1.6% vs enforcing)", author: "Jirka Hladky", msgid: "20260727154300"},
			{s: "kill bogo-ops/sec [Disabled] 93,566 (+35.4% vs enforcing)"},
			{s: "kill bogo-ops/sec [Delta] ~1%"},
			{s: "kill bogo-ops/sec [Delta] -30.2%", platform: "POWER10"},
			// The table whose header and separators a mail client wrapped.
			{s: "kill bogo-ops/sec [PREEMPT_LAZY=y] 86,878", line: 19, platform: "POWER10"},
			{s: "kill bogo-ops/sec [voluntary -> full+PREEMPT_RCU] -30.2%", line: 24},
		}},
		{"generic-entry-v5-report.mbox", 37, []want{
			{s: "bogo-ops/sec [7.1, Enforcing] 69,107", author: "Jirka Hladky", line: 19, platform: "POWER10", tool: "stress-ng"},
			{s: "bogo-ops/sec [7.2-rc4, SELinux tax] -43.3%", line: 20},
			{s: "bogo-ops/sec [Delta, Disabled] +6.1%", line: 21},
			// The cover letter is only quoted: attributed through a
			// Gmail attribution wrapped over two lines.
			{s: "syscall basic usec/op [basic, test] 0.093023 (-0.56% vs Base)", author: "Mukesh Kumar Chaurasiya (IBM)", quoted: true, line: 61, tool: "perf bench"},
			{s: "syscall getpgid ops/sec [getpgid, New] 10,790,324 (+5.38% vs Base)", quoted: true, line: 73},
			{s: "ns [Broadcast lock, New] 2,125,658,641.76 (-1.82% vs Base)", quoted: true},
		}},
		{"ppc-dynamic-preempt-arm64-followup.mbox", 18, []want{
			{s: "us/op [self-kill (kill to self)] 1.16", line: 12, platform: "Ampere Altra Max"},
			{s: "ops/s [self-kill (kill to self)] 863,000", line: 12},
			{s: "us/op [ppc64le POWER10] 0.106", platform: "POWER10"},
			{s: "kill ops/sec [6.18.0-vol-dynamic] 5,477", line: 40, platform: "Ampere Altra Max"},
			{s: "kill us/op [6.18.0-vol-dynamic] 182.6", line: 40},
			{s: "kill ops/sec [Delta] -11.2%", line: 41},
			{s: "us/op [aarch64 on] 182.6", platform: "aarch64"},
		}},
		{"rcu-gp-qs-v2.mbox", 100, []want{
			{s: "synchronize_rcu ms [1, Mean] 10.088", author: "Joel Fernandes", line: 23},
			{s: "synchronize_rcu ms [Mean latency] 6.04 (-38% vs 9.75 ms)", line: 49},
			{s: "synchronize_rcu ms [task-clock, With Patch] 898 (-11% vs Baseline)"},
			{s: "s [real] 24.221", author: "Uladzislau Rezki"},
			{s: "us [median, 3] 15,765", platform: "x86_64"},
		}},
		{"ppc-dynamic-preempt-v6.1-backport.mbox", 0, nil},
	} {
		t.Run(c.file, func(t *testing.T) {
			ns := readThread(t, c.file)
			if len(ns) != c.total {
				t.Errorf("%d numbers, want %d:\n%s", len(ns), c.total, strs(ns))
			}
			for _, w := range c.want {
				got := find(ns, w.s)
				if len(got) != 1 {
					t.Errorf("%q found %d times in:\n%s", w.s, len(got), strs(ns))
					continue
				}
				n := got[0]
				if w.author != "" && n.Author != w.author || n.Quoted != w.quoted || w.line != 0 && n.Line != w.line ||
					!strings.HasPrefix(n.MessageID, w.msgid) || w.platform != "" && n.Platform != w.platform || w.tool != "" && n.Tool != w.tool {
					t.Errorf("%q: author %q quoted %v line %d msgid %s platform %q tool %q; want %+v", w.s, n.Author, n.Quoted, n.Line, n.MessageID, n.Platform, n.Tool, w)
				}
			}
			for _, n := range ns {
				if n.Text == "" || n.MessageID == "" || n.Value == nil && n.Change == nil {
					t.Errorf("incomplete %+v", n)
				}
				if strings.Contains(n.Label, "arch/") || strings.Contains(n.Text, "|  ") && strings.Contains(n.Text, "+") {
					t.Errorf("diffstat read as a table: %s", n.Text)
				}
			}
		})
	}
}

func msg(body string) *mbox.Message {
	return &mbox.Message{MessageID: "shape@example.org", From: mbox.Address{Name: "Tess Ter", Email: "t@example.org"}, Body: body}
}

func readBody(body string) []Number {
	return Read(mbox.NewThread([]*mbox.Message{msg(body)}, "test"))
}

// TestShapes holds tables in shapes the seed threads do not have.
func TestShapes(t *testing.T) {
	for _, c := range []struct {
		name, body string
		want       []string
	}{
		{"misaligned columns, separators, units in headers", `
Results:

kernel        time (ms)     throughput (ops/sec)
------        ---------     --------------------
base        12.5          1,234,567
patched          +13.25        1 234 000   (-0.05%)
`, []string{"ms [base, time] 12.5", "ops/sec [base] 1,234,567", "ms [patched, time] 13.25", "ops/sec [patched] 1,234,000 (-0.05%)"}},
		{"markdown with a change column without %", `
perf bench sched usec/op

| Benchmark | Base | Patched | change % |
|:----------|-----:|--------:|---------:|
| pipe      | 5.1  | 4.9     | -3.92    |
| messaging | 10   | 11      | +10      |
`, []string{"sched pipe usec/op [pipe, Base] 5.1", "sched pipe usec/op [pipe, Patched] 4.9 (-3.92% vs Base)", "sched messaging usec/op [messaging, Base] 10", "sched messaging usec/op [messaging, Patched] 11 (+10% vs Base)"}},
		{"CRLF, tabs and a wrapped row", "stress-ng --kill 1 -t 10\r\n\r\nKernel\t\tPREEMPT_RCU\tkill bogo-ops/sec\r\n6.1-voluntary\t\tno\r\n\t\t\t\t105,014\r\n6.1-full\tyes\t73,317\r\n",
			[]string{"kill bogo-ops/sec [6.1-voluntary] 105,014", "kill bogo-ops/sec [6.1-full] 73,317"}},
		{"delta row leaves a column empty", `
Mode        Enforcing    Permissive    Disabled
7.1         69,107       70,248        93,566
Delta                    +1.6%         +35.4%
`, []string{"[7.1, Enforcing] 69,107", "[7.1, Permissive] 70,248", "[7.1, Disabled] 93,566", "[Delta, Permissive] +1.6%", "[Delta, Disabled] +35.4%"}},
		{"per-op lines and prose", `
getppid:   0.106 us/op
fork:      -12.5 usecs/op (-3%)
It ran at 1.2M ops/sec on that box, about 863k ops/sec on the other.
`, []string{"us/op [getppid] 0.106", "us/op [fork] -12.5 (-3%)", "ops/sec [It ran at] 1,200,000", "ops/sec [It ran at 1.2M ops/sec on that box, about] 863,000"}},
		{"quoted with and without attribution", `
On Tue, Mar 3, 2026 at 10:00 AM Ada Lovelace <ada@example.org> wrote:
> getppid:   0.106 us/op

Mine:
getppid:   0.120 us/op

> fork:      875 ops/sec
`, []string{"us/op [getppid] 0.106", "us/op [getppid] 0.12", "ops/s [fork] 875"}},
		{"a figure line wrapped by the mail client", `
- Mean latency: 9.75 ms ->
  6.04 ms (38% improvement)
- Max latency: 25.72 ms -> 10.25 ms
`, []string{"ms [Mean latency] 6.04 (-38% vs 9.75 ms)", "ms [Max latency] 10.25 (vs 25.72 ms)"}},
		// Real stress-ng 0.15.06 output (Debian bookworm), as printed.
		{"stress-ng --metrics-brief", `
On 6.1-voluntary:
stress-ng: info:  [26978] setting to a 1 second run per stressor
stress-ng: info:  [26978] dispatching hogs: 1 kill
stress-ng: metrc: [26978] stressor       bogo ops real time  usr time  sys time   bogo ops/s     bogo ops/s
stress-ng: metrc: [26978]                           (secs)    (secs)    (secs)   (real time) (usr+sys time)
stress-ng: metrc: [26978] kill               2550      1.01      0.06      0.16      2531.27       11211.90
stress-ng: metrc: [26978] miscellaneous metrics:
stress-ng: metrc: [26978] kill               61237.14 kill calls per sec (geometic mean of 1 instances)
stress-ng: info:  [26978] successful run completed in 1.03s
`, []string{"kill bogo-ops/s (real time) [On 6.1-voluntary] 2,531.27", "kill bogo-ops/s (usr+sys time) [On 6.1-voluntary] 11,211.9"}},
		{"stress-ng --metrics, wrapped and quoted, without the prefix", `
> stressor       bogo ops real time  usr time  sys time   bogo ops/s
> bogo ops/s CPU used per       RSS Max
>                           (secs)    (secs)    (secs)   (real time)
> (usr+sys time) instance (%)          (KB)
> get                 182      1.00      0.01      0.14       181.62
>     1241.46        14.63          3512
> kill               1808      0.99      0.06      0.09      1825.79
>    12296.31        14.85          2548
`, []string{"get bogo-ops/s (real time) 181.62", "get bogo-ops/s (usr+sys time) 1,241.46", "kill bogo-ops/s (real time) 1,825.79", "kill bogo-ops/s (usr+sys time) 12,296.31"}},
		// Real perf bench output (Debian's perf).
		{"perf bench's own output", `
# Running 'syscall/basic' benchmark:
# Executed 200000 getppid() calls
     Total time: 0.787 [sec]

       3.939920 usecs/op
         253812 ops/sec

Later, unrelated: 1.5 us/op.
`, []string{"syscall basic usecs/op 3.93992", "syscall basic ops/sec 253,812", "getppid us/op [Later, unrelated] 1.5"}},
		{"no numbers: prose, code, diffstat", `
The 6.16 kernel regressed by ~19% throughput.
 arch/powerpc/Kconfig               |  1 +
 2 files changed, 3 insertions(+)
	default y if (PREEMPT || PREEMPT_RT)
Version:  v4 (newest)
`, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			ns := readBody(c.body)
			var got []string
			for _, n := range ns {
				got = append(got, n.String())
			}
			if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Errorf("got\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(c.want, "\n  "))
			}
		})
	}
}

func TestAttribution(t *testing.T) {
	ns := readBody(`
On Tue, Mar 3, 2026 at 10:00 AM Ada Lovelace
<ada@example.org> wrote:
> On Mon, 2 Mar 2026 09:00:00 +0100, Bob Builder wrote:
> > fork:      875 ops/sec
> getppid:   0.106 us/op

> exec:   2,239 ops/sec
fork:   900 ops/sec
> > >  clone:   3 us/op
`)
	want := map[string]string{"fork 875": "Bob Builder", "getppid 0.106": "Ada Lovelace", "exec 2239": "Ada Lovelace", "fork 900": "Tess Ter", "clone 3": ""}
	if len(ns) != len(want) {
		t.Fatalf("%d numbers:\n%s", len(ns), strs(ns))
	}
	for _, n := range ns {
		k := n.Label + " " + FormatValue(*n.Value)
		k = strings.ReplaceAll(k, ",", "")
		a, ok := want[k]
		if !ok || n.Author != a || n.Quoted != (n.Author != "Tess Ter") {
			t.Errorf("%s: author %q quoted %v, want %q", k, n.Author, n.Quoted, a)
		}
	}
}

func TestParseValue(t *testing.T) {
	for _, c := range []struct {
		in   string
		v    float64
		unit string
		ok   bool
	}{
		{"1,234,567", 1234567, "", true},
		{"1 234 567", 1234567, "", true},
		{"1\u202f234", 1234, "", true},
		{"-32%", -32, "%", true},
		{"(+1.6%)", 1.6, "%", true},
		{"−5.11", -5.11, "", true},
		{"863k ops/sec", 863000, "ops/s", true},
		{"48M", 48e6, "", true},
		{"0m1.936s", 1.936, "s", true},
		{"9.19 us/op", 9.19, "us/op", true},
		{"162.0 usecs/op", 162, "us/op", true},
		{"~0%", 0, "%", true},
		{"6.15-rc6", 0, "", false},
		{"16 ++++", 0, "", false},
		{"1,23", 0, "", false},
		{"yes", 0, "", false},
		{"(eln150)", 0, "", false},
	} {
		v, ok := parseValue(c.in)
		if ok != c.ok || ok && (math.Abs(v.v-c.v) > 1e-9 || v.unit != c.unit) {
			t.Errorf("parseValue(%q) = %+v, %v; want %v %q %v", c.in, v, ok, c.v, c.unit, c.ok)
		}
	}
}

// FuzzRead feeds arbitrary bodies to the reader: no panic, the same
// answer twice, and every Number it returns is complete, finite and
// points at a line of the body.
func FuzzRead(f *testing.F) {
	files, _ := filepath.Glob("../testdata/threads/*.mbox")
	for _, p := range files {
		for _, m := range parseMbox(f, p) {
			for _, b := range seedChunks(m.Body, 2<<10) {
				f.Add(b)
			}
		}
	}
	f.Add("a  1,234  (-5%)\n> b:  2 us/op\nDelta  ~1% (noise)\n| x | 1 |\n")
	f.Fuzz(func(t *testing.T, body string) {
		ns := readBody(body)
		if again := readBody(body); !reflect.DeepEqual(ns, again) {
			t.Fatalf("two reads differ:\n%s\n%s", strs(ns), strs(again))
		}
		lines := strings.Count(strings.ReplaceAll(body, "\r", ""), "\n") + 1
		for _, n := range ns {
			if n.Line < 1 || n.Line > lines {
				t.Fatalf("line %d of %d: %+v", n.Line, lines, n)
			}
			if n.Value == nil && n.Change == nil || n.Text == "" || n.Table < 1 {
				t.Fatalf("incomplete: %+v", n)
			}
			for _, p := range []*float64{n.Value, n.Change} {
				if p != nil && (math.IsNaN(*p) || math.IsInf(*p, 0)) {
					t.Fatalf("not finite: %+v", n)
				}
			}
			if utf8.ValidString(body) && (!utf8.ValidString(n.Label) || !utf8.ValidString(n.Author)) {
				t.Fatalf("invalid UTF-8 out of valid input: %+v", n)
			}
			_ = n.String()
		}
	})
}

// seedChunks cuts a message body at blank lines into pieces of at most
// max bytes (a longer paragraph is cut at a line end) and keeps those
// with a digit: the tables and figure lines with the captions and quote
// marks around them, from every message of the threads. The first seeds,
// 8 KiB heads of the mailboxes, made every execution read kilobytes of
// headers and patch and never reached the tables further on.
func seedChunks(body string, max int) []string {
	var out []string
	var cur strings.Builder
	flush := func() {
		if strings.ContainsAny(cur.String(), "0123456789") {
			out = append(out, cur.String())
		}
		cur.Reset()
	}
	for _, para := range strings.SplitAfter(body, "\n\n") {
		if cur.Len() > 0 && cur.Len()+len(para) > max {
			flush()
		}
		for _, l := range strings.SplitAfter(para, "\n") {
			if cur.Len() > 0 && cur.Len()+len(l) > max {
				flush()
			}
			cur.WriteString(l)
		}
	}
	flush()
	return out
}

// BenchmarkRead reads the seed threads (the v4 thread: 18 messages, 2,218
// lines, 30 numbers) and generated adversarial bodies.
func BenchmarkRead(b *testing.B) {
	for _, name := range []string{"ppc-dynamic-preempt-v4.mbox", "rcu-gp-qs-v2.mbox"} {
		path := filepath.Join("..", "testdata", "threads", name)
		ms := parseMbox(b, path)
		fi, err := os.Stat(path)
		if err != nil {
			b.Fatal(err)
		}
		th := mbox.NewThread(ms, path)
		b.Run(name, func(b *testing.B) {
			b.SetBytes(fi.Size())
			for b.Loop() {
				Read(th)
			}
		})
	}
	// Adversarial shapes, each at two sizes: the time per byte must stay
	// flat (a paragraph of two-cell lines each followed by a lone number
	// was quadratic: 4 s at 256 KiB).
	for _, shape := range []struct{ name, unit string }{
		{"wrapped-pairs", "a  b\n1\n"},
		{"table-rows", "x  1  2\n"},
	} {
		for _, size := range []int{32 << 10, 256 << 10} {
			body := strings.Repeat(shape.unit, size/len(shape.unit))
			b.Run(fmt.Sprintf("%s-%dKiB", shape.name, size>>10), func(b *testing.B) {
				b.SetBytes(int64(len(body)))
				for b.Loop() {
					readBody(body)
				}
			})
		}
	}
}
