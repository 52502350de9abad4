package main

import (
	"flag"
	"fmt"
	"strings"
)

// flagError is one line for a flag the command refused: an unknown flag
// names the closest the command has, a bad value the flag and what it
// takes.
func flagError(fs *flag.FlagSet, err error) string {
	msg := err.Error()
	name, unknown := strings.CutPrefix(msg, "flag provided but not defined: ")
	if !unknown {
		return msg + fmt.Sprintf(" (patcheval %s -h lists the flags)", strings.TrimPrefix(fs.Name(), "patcheval "))
	}
	bare := strings.TrimLeft(name, "-")
	line := fmt.Sprintf("unknown flag %s", dashed(bare))
	if best := closestFlag(fs, bare); best != "" {
		line += fmt.Sprintf("; did you mean %s?", dashed(best))
	}
	return line + fmt.Sprintf(" (patcheval %s -h lists the flags)", strings.TrimPrefix(fs.Name(), "patcheval "))
}

// dashed spells a flag as the help does: -m, --am-out.
func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// closestFlag is the flag of fs nearest to name: one that starts with it
// or that it starts with, else the smallest edit distance within a third
// of the name's length (at least 2).
func closestFlag(fs *flag.FlagSet, name string) string {
	best, bestD := "", 1<<30
	fs.VisitAll(func(f *flag.Flag) {
		if strings.HasPrefix(f.Usage, "deprecated") {
			return
		}
		d := editDistance(strings.ToLower(name), f.Name)
		if len(name) >= 3 && (strings.HasPrefix(f.Name, name) || strings.HasPrefix(name, f.Name) && len(f.Name) >= 3) {
			d = min(d, 1)
		}
		if d < bestD || d == bestD && f.Name < best {
			best, bestD = f.Name, d
		}
	})
	if bestD > max(2, len(name)/3) {
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
