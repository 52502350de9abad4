// Package xdg resolves patcheval's directories: settings in
// ~/.config/patcheval, state (SQLite, logs) in ~/.local/share/patcheval,
// caches (threads, trees, builds) in ~/.cache/patcheval.
//
// Each is overridable by environment: PATCHEVAL_CONFIG_DIR,
// PATCHEVAL_STATE_DIR, PATCHEVAL_CACHE_DIR (then XDG_CONFIG_HOME,
// XDG_DATA_HOME, XDG_CACHE_HOME). Command-line flags override both.
package xdg

import (
	"os"
	"path/filepath"
)

func dir(own, xdgVar, fallback string) string {
	if v := os.Getenv(own); v != "" {
		return v
	}
	if v := os.Getenv(xdgVar); v != "" {
		return filepath.Join(v, "patcheval")
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		home = os.TempDir()
	}
	return filepath.Join(home, fallback, "patcheval")
}

// ConfigDir is the settings directory.
func ConfigDir() string { return dir("PATCHEVAL_CONFIG_DIR", "XDG_CONFIG_HOME", ".config") }

// StateDir is the state directory (database, logs).
func StateDir() string { return dir("PATCHEVAL_STATE_DIR", "XDG_DATA_HOME", ".local/share") }

// CacheDir is the cache directory (threads, trees, builds).
func CacheDir() string { return dir("PATCHEVAL_CACHE_DIR", "XDG_CACHE_HOME", ".cache") }
