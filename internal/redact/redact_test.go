package redact

import (
	"strings"
	"testing"
)

func TestString(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"postgres://u:s3cret@db.example/p", "postgres://u:xxxxx@db.example/p"},
		{"postgres://u@h/db?password=s3cret&sslmode=disable", "postgres://u@h/db?password=xxxxx&sslmode=disable"},
		{"postgresql://u@h/db?sslpassword=zz", "postgresql://u@h/db?sslpassword=xxxxx"},
		{"host=db user=u password=s3cret dbname=p", "host=db user=u password=xxxxx dbname=p"},
		{"host=db password = 'my s3cret' dbname=p", "host=db password = xxxxx dbname=p"},
		{`host=db password='a \' b' dbname=p`, "host=db password=xxxxx dbname=p"},
		{"PASSWORD=s3cret", "PASSWORD=xxxxx"},
		{"patchwork https://bot:hunter22@patchwork.example/api/1.3/: 401", "patchwork https://bot:xxxxx@patchwork.example/api/1.3/: 401"},
		{"bad http://u:pw%zz@h/ url", "bad http://u:xxxxx@h/ url"},
		{"/var/lib/patcheval/patcheval.db", "/var/lib/patcheval/patcheval.db"},
		{"https://lore.kernel.org/all/", "https://lore.kernel.org/all/"},
	} {
		if got := String(c.in); got != c.want {
			t.Errorf("String(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestError(t *testing.T) {
	loc := "postgres://u@h/db?password=s%40cret"
	msg := `failed to connect to user=u database=db: password "s@cret" rejected (s%40cret)`
	if got := Error(msg, loc); strings.Contains(got, "s@cret") || strings.Contains(got, "s%40cret") {
		t.Errorf("Error kept the password: %q", got)
	}
	kvloc := "host=h password=topsecret dbname=x"
	if got := Error("cannot open topsecret", kvloc); strings.Contains(got, "topsecret") {
		t.Errorf("Error kept the key=value password: %q", got)
	}
}

func TestStringInText(t *testing.T) {
	in := "store: postgres:///?dbname=db&host=h&password=pw1&user=u: creating schema: failed"
	want := "store: postgres:///?dbname=db&host=h&password=xxxxx&user=u: creating schema: failed"
	if got := String(in); got != want {
		t.Errorf("String(%q) = %q, want %q", in, got, want)
	}
}
