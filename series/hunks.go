package series

import (
	"fmt"
	"strings"
)

// truncatedHunk says where a patch's diff ends before its last hunk does
// (a mail cut mid-hunk: the hunk header promises more lines than follow),
// naming the file and hunk; "" for a whole diff. git apply would say only
// "corrupt patch at line N".
func truncatedHunk(diff string) string {
	file, hunk := "", 0
	oldLeft, newLeft := 0, 0
	short := func() string {
		if oldLeft > 0 || newLeft > 0 {
			return fmt.Sprintf("%s: hunk #%d ends %d line(s) early (its header promises more than the patch has: truncated?)", file, hunk, max(oldLeft, newLeft))
		}
		return ""
	}
	for _, l := range strings.Split(diff, "\n") {
		if oldLeft > 0 || newLeft > 0 {
			switch {
			case strings.HasPrefix(l, " ") || l == "":
				oldLeft--
				newLeft--
				continue
			case strings.HasPrefix(l, "-"):
				oldLeft--
				continue
			case strings.HasPrefix(l, "+"):
				newLeft--
				continue
			case strings.HasPrefix(l, `\`):
				continue
			}
			if s := short(); s != "" {
				return s
			}
		}
		switch {
		case strings.HasPrefix(l, "diff --git "):
			file, hunk = strings.TrimPrefix(l[strings.LastIndex(l, " ")+1:], "b/"), 0
		case strings.HasPrefix(l, "+++ ") && !strings.HasPrefix(l, "+++ /dev/null"):
			file = strings.TrimPrefix(strings.Fields(l)[1], "b/")
		case strings.HasPrefix(l, "@@ -"):
			hunk++
			oldLeft, newLeft = hunkCounts(l)
		}
	}
	return short()
}
