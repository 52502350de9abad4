package watch

import (
	"math/rand"
	"slices"
	"strings"
	"testing"
)

func TestTagsOrderByVersionNotName(t *testing.T) {
	want := []string{"v6.1", "v6.1.9", "v6.1.10", "v6.1.23", "v6.2-rc1", "v6.2-rc2", "v6.2-rc9", "v6.2-rc10",
		"v6.2", "v6.2.1", "v6.10-rc1", "v6.10", "v7.0-rc1", "next-20250109", "next-20250110", "v6.1-debian"}
	for seed := int64(0); seed < 20; seed++ {
		got := slices.Clone(want)
		rand.New(rand.NewSource(seed)).Shuffle(len(got), func(i, j int) { got[i], got[j] = got[j], got[i] })
		SortTags(got)
		if !slices.Equal(got, want) {
			t.Fatalf("seed %d:\n got %s\nwant %s", seed, strings.Join(got, " "), strings.Join(want, " "))
		}
	}
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"v6.2-rc10", "v6.2-rc9", 1}, {"v6.2", "v6.2-rc10", 1}, {"v6.2", "v6.2.0", -1}, // equal versions: by name, so the order is total
		{"v6.1.23", "v6.2-rc1", -1}, {"6.2", "v6.2", -1},
	} {
		if got := CompareTags(tc.a, tc.b); got != tc.want {
			t.Errorf("CompareTags(%s, %s) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
	for _, bad := range []string{"v6.1-debian", "v6.2-rc", "v6.2-rc0", "v6..2", "v", "v6.2-rc01", "latest"} {
		if v, ok := ParseVersion(bad); ok {
			t.Errorf("ParseVersion(%q) = %+v, want not a version", bad, v)
		}
	}
}

func TestTagGlobs(t *testing.T) {
	for _, tc := range []struct {
		pattern, tag string
		want         bool
	}{
		{"v6.*-rc*", "v6.2-rc1", true}, {"v6.*-rc*", "v6.2", false}, {"v6.*-rc*", "v7.0-rc1", false},
		{"v6.*", "v6.1.23", true}, {"refs/tags/v6.*", "v6.2", true}, {"v6.?-rc[1-3]", "v6.2-rc3", true},
		{"v6.?-rc[1-3]", "v6.2-rc4", false}, {"*", "next-20250101", true},
	} {
		if got := MatchTag(tc.pattern, tc.tag); got != tc.want {
			t.Errorf("MatchTag(%q, %q) = %v, want %v", tc.pattern, tc.tag, got, tc.want)
		}
	}
	for _, bad := range []string{"", "  ", "v6.[", "v6.\\"} {
		if err := ValidGlob(bad); err == nil {
			t.Errorf("ValidGlob(%q) accepted", bad)
		}
	}
}

// TestBadSchedulesAreErrorsNotPanics: robfig/cron v3.0.1 panics on some
// of these; each must come back as an error naming the spec.
func TestBadSchedulesAreErrorsNotPanics(t *testing.T) {
	for _, tc := range []struct{ spec, want string }{
		{"", "empty"},
		{"TZ=", "no schedule follows"},
		{"TZ=UTC", "no schedule follows"},
		{"CRON_TZ=UTC", "no schedule follows"},
		{"CRON_TZ=Europe/Paris   ", "no schedule follows"},
		{"TZ= 0 3 * * *", "empty time zone"},
		{"CRON_TZ=Mars/Olympus 0 3 * * *", "bad location"},
		{"0 0 3 * * *", "seconds are not supported"},
		{"* * * *", "expected exactly 5 fields"},
		{"garbage", "expected exactly 5 fields"},
		{"61 * * * *", "above maximum"},
		{"*/0 * * * *", "step"},
		{"5-1 * * * *", "beyond end"},
		{"@every", "duration"},
		{"@every soon", "duration"},
		{"@every 10s", "shorter than a minute"},
		{"@every -5m", "shorter than a minute"},
		{"@fortnightly", "unrecognized descriptor"},
		{"1-2-3 * * * *", "too many hyphens"},
		{"a-b * * * *", "failed to parse"},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			s, err := ParseSchedule(tc.spec)
			if err == nil {
				t.Fatalf("ParseSchedule(%q) = %v, want an error", tc.spec, s)
			}
			if !strings.Contains(err.Error(), tc.want) || (tc.spec != "" && !strings.Contains(err.Error(), tc.spec)) {
				t.Fatalf("ParseSchedule(%q): %v; want it to name the spec and say %q", tc.spec, err, tc.want)
			}
		})
	}
	for _, good := range []string{"@every 30m", "@every 1h30m", "@hourly", "@daily", "0 */6 * * *",
		"CRON_TZ=UTC 0 3 * * 1-5", "TZ=Europe/Berlin 30 2 * * *", "  @every 2h  "} {
		if _, err := ParseSchedule(good); err != nil {
			t.Errorf("ParseSchedule(%q): %v", good, err)
		}
	}
}
