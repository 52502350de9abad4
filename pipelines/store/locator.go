package store

import (
	"net/url"
	"regexp"
	"strings"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/lazyre"
	"github.com/patcheval/patcheval/internal/redact"
)

// ParseLocator reads a --db value into what Open takes:
//
//   - "" stays "" (Open's DefaultPath);
//   - a postgres:// or postgresql:// URL stays as it is;
//   - a libpq key=value string ("host=db user=u dbname=p") becomes the
//     equivalent postgres:/// URL, its keys as query parameters;
//   - sqlite:PATH, sqlite:///PATH and file:PATH are the SQLite file PATH;
//   - anything else without "=" and "://" is a SQLite file path.
//
// A value that is none of these for sure is a bad-input error (exit 2)
// naming the flag and the value without its password: another scheme,
// or a "path" holding "=" that is not a key=value string of known libpq
// keys (a mistyped connection string must not become a SQLite file in
// the working directory). A SQLite file whose name holds "=" is given as
// sqlite:PATH.
func ParseLocator(v string) (string, error) {
	switch {
	case v == "":
		return "", nil
	case IsPostgres(v):
		if _, err := url.Parse(v); err != nil {
			return "", fail.Inputf("--db %s: not a valid postgres:// URL", redact.String(v))
		}
		return v, nil
	case strings.HasPrefix(v, "sqlite:"), strings.HasPrefix(v, "file:"):
		pu, err := url.Parse(v)
		if err != nil {
			return "", fail.Inputf("--db %s: %v", redact.String(v), err)
		}
		p := pu.Path
		if p == "" {
			p = pu.Opaque
		}
		if p == "" {
			return "", fail.Inputf("--db %s: no file path", v)
		}
		return p, nil
	case strings.Contains(v, "://"):
		return "", fail.Inputf("--db %s: unknown scheme (want a SQLite file path, sqlite:PATH, postgres://... or libpq key=value)", redact.String(v))
	case strings.Contains(v, "="):
		return keyValueURL(v)
	default:
		return v, nil
	}
}

// libpqKeys are the connection parameters libpq documents (and pgx's
// pool_* settings): a key=value --db may use only these.
var libpqKeys = map[string]bool{}

func init() {
	for _, k := range strings.Fields(`host hostaddr port dbname user password passfile channel_binding connect_timeout
		client_encoding options application_name fallback_application_name keepalives keepalives_idle
		keepalives_interval keepalives_count tcp_user_timeout replication gssencmode sslmode requiressl
		sslcompression sslcert sslkey sslpassword sslcertmode sslrootcert sslcrl sslcrldir sslsni requirepeer
		ssl_min_protocol_version ssl_max_protocol_version krbsrvname gsslib gssdelegation service
		target_session_attrs load_balance_hosts pool_max_conns pool_min_conns pool_max_conn_lifetime
		pool_max_conn_idle_time pool_health_check_period`) {
		libpqKeys[k] = true
	}
}

// kvPair is one key=value pair of a libpq string: a word, or a single
// quoted value with \' and \\ escapes.
var kvPair = lazyre.New(`^\s*([A-Za-z_]+)\s*=\s*('((?:[^'\\]|\\.)*)'|([^\s']*))`)

// keyValueURL turns a libpq key=value string into a postgres:/// URL,
// or refuses it.
func keyValueURL(v string) (string, error) {
	q := url.Values{}
	rest := v
	for strings.TrimSpace(rest) != "" {
		m := kvPair.FindStringSubmatchIndex(rest)
		if m == nil {
			return "", ambiguous(v)
		}
		key := rest[m[2]:m[3]]
		var val string
		if m[6] >= 0 {
			val = regexp.MustCompile(`\\(.)`).ReplaceAllString(rest[m[6]:m[7]], "$1")
		} else {
			val = rest[m[8]:m[9]]
		}
		if !libpqKeys[key] {
			return "", ambiguous(v)
		}
		q.Set(key, val)
		rest = rest[m[1]:]
		if rest != "" && !strings.HasPrefix(rest, " ") && !strings.HasPrefix(rest, "\t") {
			return "", ambiguous(v)
		}
	}
	if q.Get("dbname") == "" && q.Get("host") == "" && q.Get("service") == "" {
		return "", ambiguous(v)
	}
	return "postgres:///?" + q.Encode(), nil
}

func ambiguous(v string) error {
	return fail.Inputf("--db %q: neither a SQLite file path nor a libpq key=value string of known keys (host=... dbname=...); a SQLite file whose name holds '=' is given as sqlite:PATH", redact.String(v))
}
