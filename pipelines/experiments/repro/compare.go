package repro

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/patcheval/patcheval/internal/fail"
)

// Row is one (variant, benchmark, metric) of a comparison of two
// samples.csv files.
type Row struct {
	Variant, Benchmark, Metric string
	N, OtherN                  int
	Mean, OtherMean            float64
	// DiffPct is (OtherMean-Mean)/Mean in percent.
	DiffPct float64
	Within  bool
}

// Compare reads two samples.csv files (the original's, a rerun's) and
// compares the mean of every (variant, benchmark, metric): within
// tolerance percent, with the same number of samples, or not. ok is
// whether every row is within and neither file has a row the other lacks.
func Compare(a, b io.Reader, tolerance float64) (rows []Row, ok bool, err error) {
	sa, err := readSamples(a, "first")
	if err != nil {
		return nil, false, err
	}
	sb, err := readSamples(b, "second")
	if err != nil {
		return nil, false, err
	}
	keys := map[[3]string]bool{}
	for k := range sa {
		keys[k] = true
	}
	for k := range sb {
		keys[k] = true
	}
	var ks [][3]string
	for k := range keys {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool { return strings.Join(ks[i][:], "\x00") < strings.Join(ks[j][:], "\x00") })
	ok = true
	for _, k := range ks {
		x, y := sa[k], sb[k]
		r := Row{Variant: k[0], Benchmark: k[1], Metric: k[2], N: len(x), OtherN: len(y), Mean: mean(x), OtherMean: mean(y)}
		if len(x) > 0 && len(y) > 0 && r.Mean != 0 {
			r.DiffPct = (r.OtherMean - r.Mean) / math.Abs(r.Mean) * 100
			r.Within = math.Abs(r.DiffPct) <= tolerance && len(x) == len(y)
		}
		ok = ok && r.Within
		rows = append(rows, r)
	}
	return rows, ok, nil
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return 0 // no samples: the row is not within (JSON has no NaN)
	}
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

func readSamples(r io.Reader, which string) (map[[3]string][]float64, error) {
	cr := csv.NewReader(r)
	head, err := cr.Read()
	if err != nil {
		return nil, fail.Inputf("%s samples.csv: %v", which, err)
	}
	col := map[string]int{}
	for i, h := range head {
		col[h] = i
	}
	for _, h := range []string{"variant", "benchmark", "metric", "value"} {
		if _, ok := col[h]; !ok {
			return nil, fail.Inputf("%s samples.csv: no %q column (header %q)", which, h, strings.Join(head, ","))
		}
	}
	out := map[[3]string][]float64{}
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fail.Inputf("%s samples.csv: %v", which, err)
		}
		v, err := strconv.ParseFloat(rec[col["value"]], 64)
		if err != nil {
			return nil, fail.Inputf("%s samples.csv:%d: value %q is not a number", which, line, rec[col["value"]])
		}
		k := [3]string{rec[col["variant"]], rec[col["benchmark"]], rec[col["metric"]]}
		out[k] = append(out[k], v)
	}
}

// String is a row as `patcheval repro --compare` prints it.
func (r Row) String() string {
	verdict := "same"
	if !r.Within {
		verdict = "DIFFERS"
	}
	return fmt.Sprintf("%-24s %-10s %-10s n=%d/%d %12.4g %12.4g %+7.2f%% %s", r.Variant, r.Benchmark, r.Metric, r.N, r.OtherN, r.Mean, r.OtherMean, r.DiffPct, verdict)
}
