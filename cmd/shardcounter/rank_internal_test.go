package main

import "testing"

// TestRescanRankingsDefault: rankings rescan by default on the stores
// whose seed clients write to the database behind the servers' backs,
// and --ranking-rescan overrides the default either way.
func TestRescanRankingsDefault(t *testing.T) {
	for store, want := range map[string]bool{
		"firestore://p":       true,
		"datastore://p":       true,
		"bolt:x.db":           false,
		"pebble:data":         false,
		"postgres://u@h:1/db": false,
		"redis://127.0.0.1:1": false,
		"redis+cluster://h:1": false,
	} {
		c := &serveCommand{store: store}
		if got := c.rescanRankings(); got != want {
			t.Errorf("%s: rescan %v by default, want %v", store, got, want)
		}
		off := !want
		c.rankingRescan = &off
		if got := c.rescanRankings(); got != off {
			t.Errorf("%s --ranking-rescan=%v: rescan %v", store, off, got)
		}
	}
}
