//go:build race || !cgo

package pebble_test

// pebbleOnHeap says that Pebble takes its memtables and block cache from
// the Go heap: without cgo always, under the race detector one run in two.
const pebbleOnHeap = true
