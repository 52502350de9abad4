// Package digest names file contents by their SHA-256, the way the
// artifact store keys blobs and the userland cache checks its downloads.
// Its entry point is File.
package digest

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
)

// File returns the lowercase hex SHA-256 of the file at p, read as a stream.
func File(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
