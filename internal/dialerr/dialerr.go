// Package dialerr words why a store could not be reached. A client's
// connection error repeats the address at each layer that wraps it ("dial
// tcp 127.0.0.1:1: connect: connection refused" inside "127.0.0.1:1
// (localhost): dial error: ..."), and the stores' messages name the
// address once themselves: Cause keeps only the reason.
package dialerr

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
)

// Cause returns why a connection attempt failed, in a few words and
// without the address: "connection refused", "cannot resolve host db1: no
// such host", "no answer in time", or else the innermost error's text
// (a server's refusal, such as a wrong password, is its own message). A
// multi-line text, such as errors.Join makes, is put on one line.
func Cause(err error) string {
	var dns *net.DNSError
	var sys *os.SyscallError
	var op *net.OpError
	var timeout interface{ Timeout() bool }
	switch {
	case err == nil:
		return ""
	case errors.As(err, &dns):
		return fmt.Sprintf("cannot resolve host %s: %s", dns.Name, dns.Err)
	case errors.As(err, &sys):
		return sys.Err.Error()
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &timeout) && timeout.Timeout():
		return "no answer in time"
	case errors.As(err, &op) && op.Err != nil:
		return oneLine(op.Err.Error())
	}
	return oneLine(err.Error())
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
