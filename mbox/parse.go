package mbox

import (
	"bytes"
	"context"
	"fmt"
	"io"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/lazyre"
)

// Parse reads a mailbox and returns its messages in file order.
//
// Accepted input:
//   - mboxrd, as lore / public-inbox serve it ("From mboxrd@z Thu Jan  1
//     00:00:00 1970" separators, body lines matching ">*From " escaped with
//     one more '>'); the escaping is reversed;
//   - mboxo (git format-patch output, mail clients): "From " separators,
//     ">From " unescaped the same way;
//   - a single raw RFC 5322 message without a From_ line (a saved .eml,
//     one message piped on stdin).
//
// CRLF line ends are turned into LF. Duplicated Message-IDs are kept here;
// NewThread keeps one of each. Input that is none of the above is a
// fail.Input error naming source and the first line found.
func Parse(r io.Reader, source string) ([]*Message, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fail.Infra(fmt.Errorf("%s: read: %w", source, err))
	}
	return parseBytes(context.Background(), data, source)
}

// ParseBytes is Parse for a mailbox already in memory.
func ParseBytes(data []byte, source string) ([]*Message, error) {
	return parseBytes(context.Background(), data, source)
}

// ParseBytesContext is ParseBytes that stops when ctx is done (a client
// that left, a signal): a fail.Infra error wrapping ctx.Err(). A large
// mailbox takes seconds to parse.
func ParseBytesContext(ctx context.Context, data []byte, source string) ([]*Message, error) {
	return parseBytes(ctx, data, source)
}

func parseBytes(ctx context.Context, data []byte, source string) ([]*Message, error) {
	data = normalizeNewlines(data)
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	// Skip leading blank lines.
	start, line := 0, 1
	for start < len(data) && data[start] == '\n' {
		start++
		line++
	}
	if start >= len(data) || len(bytes.TrimSpace(data[start:])) == 0 {
		return nil, fail.Inputf("%s: not an mbox: it is empty (no messages)", source)
	}
	first := data[start:]
	if i := bytes.IndexByte(first, '\n'); i >= 0 {
		first = first[:i]
	}
	if !bytes.HasPrefix(first, []byte("From ")) {
		if !isHeaderLine(first) {
			return nil, fail.Inputf("%s: not an mbox: first line is %q (expected a \"From \" line or a mail header)", source, clip(string(first), 60))
		}
		m, err := ParseMessage(data[start:], fmt.Sprintf("%s:%d", source, line))
		if err != nil {
			return nil, err
		}
		return []*Message{m}, nil
	}
	chunks, err := splitMbox(ctx, data[start:], line)
	if err != nil {
		return nil, fail.Infra(fmt.Errorf("%s: %w", source, err))
	}
	var out []*Message
	for i, c := range chunks {
		if i%64 == 0 && ctx.Err() != nil {
			return nil, fail.Infra(fmt.Errorf("%s: parsing stopped after %d of %d messages: %w", source, i, len(chunks), ctx.Err()))
		}
		src := fmt.Sprintf("%s:%d", source, c.line)
		if len(bytes.TrimSpace(c.data)) == 0 {
			// A From_ line with nothing after it: nothing to keep.
			continue
		}
		m, err := ParseMessage(c.data, src)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	if len(out) == 0 {
		return nil, fail.Inputf("%s: not an mbox: \"From \" lines but no messages", source)
	}
	return out, nil
}

type chunk struct {
	data []byte
	line int // 1-based line number of the From_ line
}

// strictFromRE matches a real From_ line: "From <addr> <date with hh:mm>".
// git mailsplit uses the same idea (a time and a year after the address).
var strictFromRE = lazyre.New(`^From \S+ +.*\d:\d\d`)

// looseFromRE matches From_ lines some tools write without a date
// ("From foo@bar", "From -", "From <sha1>").
var looseFromRE = lazyre.New(`^From (\S*@\S*|-|[0-9a-f]{7,64})\s*$`)

// isHeaderLine reports whether line starts a header field: a name of
// printable ASCII other than ':' followed by ':'.
func isHeaderLine(line []byte) bool {
	for i, c := range line {
		if c == ':' {
			return i > 0
		}
		if c < '!' || c > '~' {
			return false
		}
	}
	return false
}

// splitMbox cuts an mbox (LF line ends, starting with a From_ line) into
// messages, dropping From_ lines and reversing ">From " escaping.
func splitMbox(ctx context.Context, data []byte, firstLine int) ([]chunk, error) {
	var chunks []chunk
	var cur *bytes.Buffer
	curLine := 0
	flush := func() {
		if cur == nil {
			return
		}
		b := cur.Bytes()
		// The blank line before the next From_ line belongs to the mbox.
		if bytes.HasSuffix(b, []byte("\n\n")) {
			b = b[:len(b)-1]
		}
		chunks = append(chunks, chunk{data: b, line: curLine})
	}
	prevBlank := true
	lineNo := firstLine - 1
	for pos := 0; pos < len(data); {
		end := bytes.IndexByte(data[pos:], '\n')
		var ln []byte
		next := len(data)
		if end >= 0 {
			ln = data[pos : pos+end+1] // includes '\n'
			next = pos + end + 1
		} else {
			ln = data[pos:]
		}
		lineNo++
		body := bytes.TrimSuffix(ln, []byte("\n"))
		if bytes.HasPrefix(body, []byte("From ")) && (cur == nil || isFromLine(body, prevBlank, data[next:])) {
			if len(chunks)%1024 == 0 && ctx.Err() != nil {
				return nil, fmt.Errorf("splitting stopped after %d messages: %w", len(chunks), ctx.Err())
			}
			flush()
			cur = new(bytes.Buffer) // grows as needed: a 4 KiB start per message made 100k short ones cost 400 MB
			curLine = lineNo
			prevBlank = false
			pos = next
			continue
		}
		if len(body) > 0 && body[0] == '>' {
			j := 0
			for j < len(body) && body[j] == '>' {
				j++
			}
			if bytes.HasPrefix(body[j:], []byte("From ")) {
				ln = ln[1:]
			}
		}
		cur.Write(ln)
		prevBlank = len(body) == 0
		pos = next
	}
	flush()
	return chunks, nil
}

// isFromLine decides whether an unescaped "From " line inside an mbox starts
// a new message: a dated From_ line always does; a loose one only after a
// blank line and before a header line.
func isFromLine(line []byte, prevBlank bool, rest []byte) bool {
	if strictFromRE.Match(line) {
		return true
	}
	if !prevBlank || !looseFromRE.Match(line) {
		return false
	}
	if i := bytes.IndexByte(rest, '\n'); i >= 0 {
		rest = rest[:i]
	}
	return isHeaderLine(rest)
}

// normalizeNewlines turns CRLF, and any run of CRs before an LF (CRCRLF is
// what a second CRLF conversion of a CRLF file makes), into LF. A CR not
// followed by an LF stays.
func normalizeNewlines(b []byte) []byte {
	if bytes.IndexByte(b, '\r') < 0 {
		return b
	}
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); {
		if b[i] != '\r' {
			out = append(out, b[i])
			i++
			continue
		}
		j := i
		for j < len(b) && b[j] == '\r' {
			j++
		}
		if j == len(b) || b[j] != '\n' {
			out = append(out, b[i:j]...)
		}
		i = j
	}
	return out
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "..."
}
