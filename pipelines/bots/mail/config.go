package mail

import (
	"errors"
	"io/fs"
	"os"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/secretfile"
)

// LoadSettings reads the [smtp] table of config.toml (file):
//
//	[smtp]
//	host = "smtp.example.org"
//	port = 587
//	username = "me"
//	security = "starttls"          # or "tls", or "none" (loopback only)
//	password_file = "~/.config/patcheval/smtp.password"
//
// The password comes from password_file (its first line), else from
// $PATCHEVAL_SMTP_PASSWORD; never from config.toml itself. It returns nil
// when the file or its [smtp] table is missing; other tables of the file
// are left alone. Problems name the file and the key.
func LoadSettings(file string) (*SMTPSettings, error) {
	var cfg struct {
		SMTP *struct {
			Host         string `toml:"host"`
			Port         int    `toml:"port"`
			Username     string `toml:"username"`
			Security     string `toml:"security"`
			PasswordFile string `toml:"password_file"`
			HeloName     string `toml:"helo"`
		} `toml:"smtp"`
	}
	md, err := toml.DecodeFile(file, &cfg)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fail.Inputf("%s: %v", file, err)
	}
	for _, k := range md.Undecoded() {
		if len(k) >= 2 && k[0] == "smtp" {
			return nil, fail.Inputf("%s: [smtp] has no key %q (keys: host port username security password_file helo)", file, k[len(k)-1])
		}
	}
	c := cfg.SMTP
	if c == nil {
		return nil, nil
	}
	if c.Host == "" {
		return nil, fail.Inputf("%s: [smtp] host is not set", file)
	}
	if c.Port < 0 || c.Port > 65535 {
		return nil, fail.Inputf("%s: [smtp] port %d: want 1..65535", file, c.Port)
	}
	switch strings.ToLower(c.Security) {
	case "", "starttls", "tls":
	case "none":
		if !isLoopback(c.Host) {
			return nil, fail.Inputf("%s: [smtp] security \"none\" (plain text) is only for a loopback host, not %s", file, c.Host)
		}
	default:
		return nil, fail.Inputf("%s: [smtp] security %q: want starttls, tls or none", file, c.Security)
	}
	s := &SMTPSettings{Host: c.Host, Port: c.Port, Username: c.Username, Security: c.Security, HeloName: c.HeloName,
		Password: os.Getenv("PATCHEVAL_SMTP_PASSWORD")}
	if c.PasswordFile != "" {
		pw, err := secretfile.Read(file+": [smtp] password_file", c.PasswordFile)
		if err != nil {
			return nil, err
		}
		s.Password = pw
		if s.Password == "" {
			return nil, fail.Inputf("%s: [smtp] password_file %s is empty", file, c.PasswordFile)
		}
	}
	return s, nil
}
