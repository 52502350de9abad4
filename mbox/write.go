package mbox

import (
	"bytes"
	"io"
)

// MboxrdFromLine is the From_ line written before every message, the one
// public-inbox uses.
const MboxrdFromLine = "From mboxrd@z Thu Jan  1 00:00:00 1970"

// EscapeMboxrd returns msg with CRLF turned into LF and every line matching
// ">*From " prefixed with one more '>' (mboxrd escaping, reversible).
func EscapeMboxrd(msg []byte) []byte {
	msg = normalizeNewlines(msg)
	var out bytes.Buffer
	out.Grow(len(msg) + 64)
	for len(msg) > 0 {
		line := msg
		if i := bytes.IndexByte(msg, '\n'); i >= 0 {
			line = msg[:i+1]
		}
		j := 0
		for j < len(line) && line[j] == '>' {
			j++
		}
		if bytes.HasPrefix(line[j:], []byte("From ")) {
			out.WriteByte('>')
		}
		out.Write(line)
		msg = msg[len(line):]
	}
	return out.Bytes()
}

// WriteMboxrd writes msgs (raw RFC 5322 messages, no From_ line) to w as an
// mboxrd: each message gets MboxrdFromLine, is escaped with EscapeMboxrd,
// ends with a newline and is followed by a blank line. git am
// --patch-format=mboxrd, b4 and Parse read it back unchanged.
func WriteMboxrd(w io.Writer, msgs ...[]byte) error {
	var buf bytes.Buffer
	for _, m := range msgs {
		buf.Reset()
		buf.WriteString(MboxrdFromLine)
		buf.WriteByte('\n')
		e := EscapeMboxrd(m)
		buf.Write(e)
		if len(e) > 0 && e[len(e)-1] != '\n' {
			buf.WriteByte('\n')
		}
		buf.WriteByte('\n')
		if _, err := w.Write(buf.Bytes()); err != nil {
			return err
		}
	}
	return nil
}
