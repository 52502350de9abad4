// Package redact removes passwords from the strings patcheval shows:
// database locators (postgres:// URLs and libpq key=value strings),
// Patchwork, lore and server URLs with user:PASSWORD@, and error texts
// that quote them. Every place that prints such a string (stdout, errors,
// the dashboard's header, logs) goes through String or Error here, so
// there is one rule for what a secret looks like.
package redact

import (
	"net/url"
	"regexp"
	"strings"

	"github.com/patcheval/patcheval/internal/lazyre"
)

// Mask replaces a secret.
const Mask = "xxxxx"

// secretKeys are the query parameters and key=value keys whose values are
// secrets (libpq's password and sslpassword, and the usual token names).
var secretKeys = map[string]bool{
	"password": true, "sslpassword": true, "passwd": true, "pass": true, "pwd": true,
	"token": true, "access_token": true, "secret": true, "api_key": true, "apikey": true,
}

// String is s with every password masked: a URL's user:PASSWORD@ and its
// secret query parameters, and the secret values of a key=value string.
// Other text is unchanged.
func String(s string) string {
	if strings.Contains(s, "://") {
		return urls.ReplaceAllStringFunc(s, func(u string) string {
			// A URL that ends a clause ("store: URL: error") keeps its
			// punctuation outside.
			trimmed := strings.TrimRight(u, ":,;.)]")
			return URL(trimmed) + u[len(trimmed):]
		})
	}
	if strings.Contains(s, "=") {
		return KeyValue(s)
	}
	return s
}

// urls finds URL-looking words inside a longer text.
var urls = lazyre.New(`[A-Za-z][A-Za-z0-9+.-]*://[^\s"'<>]+`)

// userinfo matches the user:password@ part of a URL that url.Parse
// refused, so that even a malformed URL loses its password.
var userinfo = lazyre.New(`(://[^/@\s:]*):[^@\s]*@`)

// queryKV is one key=value of a URL's query.
var queryKV = lazyre.New(`(^|[&;])([^&;=]+)=([^&;]*)`)

// URL masks the password of one URL and its secret query parameters.
func URL(u string) string {
	pu, err := url.Parse(u)
	if err != nil {
		return userinfo.ReplaceAllString(u, "${1}:"+Mask+"@")
	}
	if pu.User != nil {
		if _, ok := pu.User.Password(); ok {
			pu.User = url.UserPassword(pu.User.Username(), Mask)
		}
	}
	pu.RawQuery = queryKV.ReplaceAllStringFunc(pu.RawQuery, func(m string) string {
		p := queryKV.FindStringSubmatch(m)
		if k, err := url.QueryUnescape(p[2]); err == nil && secretKeys[strings.ToLower(k)] {
			return p[1] + p[2] + "=" + Mask
		}
		return m
	})
	return pu.String()
}

// kv matches one key=value pair of a libpq connection string; the value
// is a word or a single-quoted string with \' and \\ escapes.
var kv = lazyre.New(`([A-Za-z_]+)(\s*=\s*)('(?:[^'\\]|\\.)*'?|[^\s']*)`)

// KeyValue masks the secret values of a key=value string (libpq's
// "host=db user=u password=X dbname=p").
func KeyValue(s string) string {
	return kv.ReplaceAllStringFunc(s, func(m string) string {
		p := kv.FindStringSubmatch(m)
		if !secretKeys[strings.ToLower(p[1])] {
			return m
		}
		return p[1] + p[2] + Mask
	})
}

// Error is msg with the secrets of locator masked: the password of the
// URL or key=value string locator (which the message may quote in any
// form, e.g. a driver's error) and everything String masks.
func Error(msg, locator string) string {
	for _, pw := range Passwords(locator) {
		if len(pw) >= 3 {
			msg = strings.ReplaceAll(msg, pw, Mask)
			msg = strings.ReplaceAll(msg, url.QueryEscape(pw), Mask)
			msg = strings.ReplaceAll(msg, url.PathEscape(pw), Mask)
		}
	}
	return String(msg)
}

// Passwords lists the secret values locator holds (a URL's password and
// secret parameters, a key=value string's secret values).
func Passwords(locator string) []string {
	var out []string
	if strings.Contains(locator, "://") {
		if pu, err := url.Parse(locator); err == nil {
			if pw, ok := pu.User.Password(); ok && pw != "" {
				out = append(out, pw)
			}
			for k, vs := range pu.Query() {
				if secretKeys[strings.ToLower(k)] {
					out = append(out, vs...)
				}
			}
			return out
		}
		if m := regexp.MustCompile(`://[^/@\s:]*:([^@\s]*)@`).FindStringSubmatch(locator); m != nil {
			out = append(out, m[1])
		}
		return out
	}
	for _, p := range kv.FindAllStringSubmatch(locator, -1) {
		if secretKeys[strings.ToLower(p[1])] {
			v := strings.Trim(p[3], "'")
			if v != "" {
				out = append(out, v)
			}
		}
	}
	return out
}
