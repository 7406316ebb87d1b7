//go:build !race && cgo

package pebble_test

// pebbleOnHeap says that Pebble takes its memtables and block cache from
// the Go heap: with cgo and without the race detector, from C's malloc.
const pebbleOnHeap = false
