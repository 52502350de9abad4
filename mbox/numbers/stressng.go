package numbers

import (
	"strconv"
	"strings"

	"github.com/patcheval/patcheval/internal/lazyre"
)

// stress-ng's own --metrics / --metrics-brief output:
//
//	stress-ng: metrc: [26978] stressor       bogo ops real time  usr time  sys time   bogo ops/s     bogo ops/s
//	stress-ng: metrc: [26978]                           (secs)    (secs)    (secs)   (real time) (usr+sys time)
//	stress-ng: metrc: [26978] kill               2550      1.01      0.06      0.16      2531.27       11211.90
//
// (older versions say "info:" for "metrc:"; people paste it with or
// without the prefix, and mail clients wrap the long rows).
var (
	sngPrefixRE = lazyre.New(`^\s*stress-ng:\s*[a-z]+:\s*\[\d+\]\s?`)
	sngHeaderRE = lazyre.New(`^\s*stressor\s+bogo ops\b`)
	sngRowRE    = lazyre.New(`^\s*([a-z][\w-]*)\s+(\d+)\s+(\d+(?:\.\d+)?)\s+(\d+(?:\.\d+)?)\s+(\d+(?:\.\d+)?)\s+(\d+(?:\.\d+)?)\s+(\d+(?:\.\d+)?)\b`)
	numsOnlyRE  = lazyre.New(`^[\s\d.]+$`)
)

func sngText(l line) string { return sngPrefixRE.ReplaceAllString(l.text, "") }

// isStressNG says whether a paragraph holds stress-ng's metrics table.
func isStressNG(ls []line) bool {
	for _, l := range ls {
		if sngHeaderRE.MatchString(sngText(l)) {
			return true
		}
	}
	return false
}

// stressNG reads stress-ng's metrics rows: per stressor, bogo-ops/s over
// real time and over usr+sys time (the metrics patcheval's stress-ng
// benchmark reports). The label is the caption ("On 6.16:"), if any.
func (r *reader) stressNG(p paragraph, caption string, c *context) {
	ls := p.lines
	for _, l := range ls {
		if sngHeaderRE.MatchString(sngText(l)) {
			break
		}
		if t := strings.TrimSpace(l.text); strings.HasSuffix(t, ":") && !sngPrefixRE.MatchString(l.text) {
			caption = t
		}
	}
	label := strings.TrimSuffix(strings.TrimSpace(caption), ":")
	if len([]rune(label)) > 60 {
		label = ""
	}
	r.table++
	for i := 0; i < len(ls); i++ {
		text := sngText(ls[i])
		show := strings.TrimSpace(ls[i].text)
		no := ls[i].no
		// A row wrapped by the mail client: the numbers go on on the
		// next line(s).
		for j := i + 1; j < len(ls) && j <= i+2 && !sngRowRE.MatchString(text); j++ {
			next := sngText(ls[j])
			if !numsOnlyRE.MatchString(next) || strings.TrimSpace(next) == "" {
				break
			}
			text += " " + strings.TrimSpace(next)
			show += " / " + strings.TrimSpace(ls[j].text)
			if sngRowRE.MatchString(text) {
				i = j
			}
		}
		m := sngRowRE.FindStringSubmatch(text)
		if m == nil || m[1] == "stressor" {
			continue
		}
		for k, metric := range []string{"bogo-ops/s (real time)", "bogo-ops/s (usr+sys time)"} {
			v, err := strconv.ParseFloat(m[6+k], 64)
			if err != nil {
				continue
			}
			r.out = append(r.out, Number{Benchmark: m[1], Tool: "stress-ng", Metric: metric, Unit: "bogo-ops/s",
				Label: label, Caption: caption, Platform: c.platform, Value: &v, MessageID: r.msg.PublicID(),
				Author: p.voice.author, Quoted: p.voice.depth > 0, Line: no, Text: show, Table: r.table})
		}
	}
}
