package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/patcheval/patcheval/mbox/numbers"
)

// writeThreadNumbers prints the numbers reported in the thread, one block
// per table with who wrote it and where, one line per row. Nothing when
// the thread reports none.
func writeThreadNumbers(w io.Writer, ns []numbers.Number) error {
	if len(ns) == 0 {
		return nil
	}
	tables := numbers.Tables(ns)
	var b strings.Builder
	fmt.Fprintf(&b, "Numbers reported in the thread (%d in %d table(s); --json has each with its line):\n", len(ns), len(tables))
	for _, t := range tables {
		first := t[0]
		who := first.Author
		switch {
		case first.Quoted && who == "":
			who = "quoted, author not named"
		case first.Quoted:
			who += " (quoted)"
		}
		var ctx []string
		for _, c := range []string{first.Tool, first.Platform} {
			if c != "" {
				ctx = append(ctx, c)
			}
		}
		subject := first.Subject()
		for _, n := range t[1:] {
			if n.Subject() != subject {
				subject = ""
				break
			}
		}
		head := fmt.Sprintf("  %s, <%s> line %d", who, first.MessageID, first.Line)
		if first.MessageID == "" {
			head = fmt.Sprintf("  %s, a message without Message-ID, line %d", who, first.Line)
		}
		if len(ctx) > 0 {
			head += " (" + strings.Join(ctx, ", ") + ")"
		}
		if subject != "" {
			head += ": " + subject
		}
		if first.Caption != "" {
			head += ` — "` + clipRunes(first.Caption, 70) + `"`
		}
		b.WriteString(head + "\n")
		// One line per row: the row's label, then each figure with its
		// column (and subject when the table mixes them).
		type row struct {
			label string
			figs  []string
			subj  []string
		}
		var rows []row
		idx := map[string]int{}
		for _, n := range t {
			k := fmt.Sprintf("%d\x00%s", n.Line, n.Label)
			i, ok := idx[k]
			if !ok {
				i = len(rows)
				idx[k] = i
				rows = append(rows, row{label: n.Label})
			}
			f := n.Figure()
			if n.Column != "" {
				f = n.Column + " " + f
			}
			rows[i].figs = append(rows[i].figs, f)
			rows[i].subj = append(rows[i].subj, n.Subject())
		}
		if subject == "" {
			// The table mixes what it measures: name it per row when the
			// row's figures agree, else per figure.
			for i, r := range rows {
				same := true
				for _, x := range r.subj {
					same = same && x == r.subj[0]
				}
				switch {
				case same && r.subj[0] != "":
					rows[i].label += " (" + r.subj[0] + ")"
				case !same:
					for j, x := range r.subj {
						if x != "" {
							rows[i].figs[j] = x + ": " + r.figs[j]
						}
					}
				}
			}
		}
		width := 0
		for _, r := range rows {
			width = max(width, len([]rune(r.label)))
		}
		for _, r := range rows {
			label := r.label
			if label == "" {
				label = "-"
			}
			fmt.Fprintf(&b, "    %-*s  %s\n", width, label, strings.Join(r.figs, ", "))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func clipRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-3]) + "..."
}
