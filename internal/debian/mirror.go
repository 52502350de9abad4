package debian

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"

	"github.com/patcheval/patcheval/internal/fail"
)

// MirrorEnv overrides the mirror Mirror reads from the system's sources.
const MirrorEnv = "PATCHEVAL_DEBIAN_MIRROR"

// Mirror returns the URL of the machine's Debian archive: $PATCHEVAL_DEBIAN_MIRROR
// when set, else the first enabled "deb" source of /etc/apt/sources.list
// and /etc/apt/sources.list.d/*.list|*.sources whose suites include one
// of Suites (so a security or third-party archive is never taken).
func Mirror() (string, error) {
	if m := os.Getenv(MirrorEnv); m != "" {
		return strings.TrimRight(m, "/"), nil
	}
	files := []string{"/etc/apt/sources.list"}
	for _, pat := range []string{"*.list", "*.sources"} {
		m, _ := filepath.Glob(filepath.Join("/etc/apt/sources.list.d", pat))
		files = append(files, m...)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var uri string
		if strings.HasSuffix(f, ".sources") {
			uri = mirrorDeb822(string(data))
		} else {
			uri = mirrorOneLine(string(data))
		}
		if uri != "" {
			return strings.TrimRight(uri, "/"), nil
		}
	}
	return "", fail.Infraf("debian: no Debian mirror serving %s in /etc/apt/sources.list{,.d} (set %s)", strings.Join(Suites[:2], " or "), MirrorEnv)
}

// mirrorOneLine reads "deb [opts] URI suite components" lines.
func mirrorOneLine(data string) string {
	sc := bufio.NewScanner(strings.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 3 || f[0] != "deb" {
			continue
		}
		f = f[1:]
		if strings.HasPrefix(f[0], "[") {
			for len(f) > 0 && !strings.HasSuffix(f[0], "]") {
				f = f[1:]
			}
			if len(f) == 0 {
				continue
			}
			f = f[1:]
		}
		if len(f) >= 2 && known(f[1]) {
			return f[0]
		}
	}
	return ""
}

// mirrorDeb822 reads deb822 stanzas (Types, URIs, Suites, Enabled).
func mirrorDeb822(data string) string {
	for _, stanza := range strings.Split(data, "\n\n") {
		fields := map[string]string{}
		for _, line := range strings.Split(stanza, "\n") {
			if strings.HasPrefix(line, "#") {
				continue
			}
			if k, v, ok := strings.Cut(line, ":"); ok && !strings.HasPrefix(line, " ") {
				fields[strings.ToLower(strings.TrimSpace(k))] = strings.TrimSpace(v)
			}
		}
		if strings.EqualFold(fields["enabled"], "no") || !contains(strings.Fields(fields["types"]), "deb") {
			continue
		}
		uris := strings.Fields(fields["uris"])
		if len(uris) == 0 {
			continue
		}
		for _, s := range strings.Fields(fields["suites"]) {
			if known(s) {
				return uris[0]
			}
		}
	}
	return ""
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
