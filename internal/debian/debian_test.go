package debian

import (
	"context"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/internal/fail"
)

func TestCompareVersions(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"7.2.13-1", "7.2.12-1~bpo13+1", 1},
		{"7.2.12-1", "7.2.12-1~bpo13+1", 1},
		{"7.2.9-1~bpo13+1", "7.2.12-1~bpo13+1", -1},
		{"7.3~rc2-1", "7.3-1", -1},
		{"1:1.0", "2.0", 1},
		{"6.1.192-3", "6.1.192-3", 0},
		{"6.12.117-1", "6.1.192-3", 1},
		{"1.0a", "1.0+", -1},
		{"1.0", "1.0a", -1},
	} {
		if got := CompareVersions(c.a, c.b); (got > 0) != (c.want > 0) || (got < 0) != (c.want < 0) {
			t.Errorf("CompareVersions(%s, %s) = %d, want sign %d", c.a, c.b, got, c.want)
		}
	}
	if u := Upstream("7.2.12-1~bpo13+1"); u != "7.2.12" {
		t.Errorf("Upstream = %s", u)
	}
}

func TestParsePackagesAndMirror(t *testing.T) {
	idx := "Package: linux-source-7.2\nVersion: 7.2.13-1\nArchitecture: all\nDescription: x\n more: y\nFilename: pool/main/l/linux/linux-source-7.2_7.2.13-1_all.deb\nSize: 164108840\nSHA256: 30a8\n\n" +
		"Package: linux-source-7.2\nVersion: 7.2.12-1~bpo13+1\nArchitecture: all\nSHA256: ab\n"
	got := ParsePackages([]byte(idx))
	if len(got) != 2 || got[0].Size != 164108840 || got[0].Filename == "" || got[1].Version != "7.2.12-1~bpo13+1" {
		t.Errorf("ParsePackages = %+v", got)
	}
	deb822 := "Types: deb\n# http://snapshot.debian.org/archive/debian-security/x\nURIs: http://deb.debian.org/debian-security\nSuites: bookworm-security\n\n" +
		"Types: deb-src\nURIs: http://src.example/debian\nSuites: bookworm\n\n" +
		"Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm bookworm-updates\nComponents: main\n"
	if m := mirrorDeb822(deb822); m != "http://deb.debian.org/debian" {
		t.Errorf("mirrorDeb822 = %q", m)
	}
	if m := mirrorOneLine("deb-src http://a/debian bookworm main\ndeb [arch=amd64 signed-by=/k.gpg] http://mirror.example/debian/ bookworm main\n"); m != "http://mirror.example/debian/" {
		t.Errorf("mirrorOneLine = %q", m)
	}
}

// TestMirrorUnreachable: with no mirror to reach, a look-up is an
// infrastructure error (exit 3) that says so, not an empty answer.
func TestMirrorUnreachable(t *testing.T) {
	a := &Apt{Dir: t.TempDir(), Suites: []string{"sid"}, Arch: "amd64", Mirror: "http://127.0.0.1:1/debian"}
	_, err := a.Versions(context.Background(), "b4")
	if fail.KindOf(err) != fail.KindInfra || !strings.Contains(err.Error(), "network or mirror") {
		t.Fatalf("Versions with an unreachable mirror: %v, want an infrastructure error naming the network", err)
	}
	if _, err := a.Find(context.Background(), "b4", "0.16.0-1"); fail.KindOf(err) != fail.KindInfra {
		t.Errorf("Find: %v, want infrastructure", err)
	}
}
