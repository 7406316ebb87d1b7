//go:build !linux

package server

// loop would serve connections from an event loop; on this system each
// connection is served on a goroutine of its own (loop_linux.go).
type loop struct{}

type loopConn struct{}

func (*loop) wakeUp() {}

// prepare leaves c to a goroutine of its own.
func (s *Server) prepare(c *conn) {}

// serveConn serves c on a goroutine of its own.
func (s *Server) serveConn(c *conn) { go c.serve() }
