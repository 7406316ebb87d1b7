package main

// newDecrCommand returns `shardcounter decr`, incr with the sign flipped.
func newDecrCommand(m *Main) command {
	return &writeCommand{clientFlags: clientFlags{m: m}, negate: true}
}
