package firestore

import "strings"

// ExpireBatch is expireBatch, for storetest.RunRequestIDExpiry.
const ExpireBatch = expireBatch

// IsMarker reports whether a request document's name is a batch marker's
// (marker.go), which tests that count request ids leave out.
func IsMarker(name string) bool { return strings.HasPrefix(name, markerPrefix) }
