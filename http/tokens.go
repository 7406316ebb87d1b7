package http

import (
	"bytes"
	"fmt"

	"github.com/shardcounter/shardcounter"
)

// MaxTokenLen bounds one bearer token, so that a file that is not a token
// file (a certificate, a binary) is refused rather than taken for tokens,
// and so that AUTH and HELLO ... AUTH with any token fit in the 4 KiB a
// RESP connection may send before it authenticates.
const MaxTokenLen = 1024

// ParseTokens parses the contents of an --auth-token-file: one token a
// line, surrounding white space and blank lines ignored, CRLF or LF line
// ends. A token is printable ASCII without spaces (RFC 6750's token
// characters and then some), since it travels in an HTTP header; a line
// that is not one is an error naming the line rather than a token that
// could never match. A file with no token at all is an error too, so that
// a truncated file does not silently turn authentication off.
func ParseTokens(data []byte) ([]string, error) {
	var tokens []string
	for i, line := range bytes.Split(data, []byte("\n")) {
		t := bytes.TrimSpace(line)
		if len(t) == 0 {
			continue
		}
		if len(t) > MaxTokenLen {
			return nil, shardcounter.Errorf(shardcounter.EINVALID, "line %d is %d bytes long: a token is at most %d", i+1, len(t), MaxTokenLen)
		}
		for _, c := range t {
			if c <= ' ' || c > '~' {
				return nil, shardcounter.Errorf(shardcounter.EINVALID,
					"line %d has the byte %s: a token is printable ASCII without spaces, one token a line", i+1, quoteByte(c))
			}
		}
		tokens = append(tokens, string(t))
	}
	if len(tokens) == 0 {
		return nil, shardcounter.Errorf(shardcounter.EINVALID, "no tokens: put one token a line")
	}
	return tokens, nil
}

func quoteByte(c byte) string {
	if c > ' ' && c <= '~' {
		return fmt.Sprintf("%q", c)
	}
	return fmt.Sprintf("0x%02x", c)
}
