package firestore

import (
	"strings"

	"github.com/shardcounter/shardcounter/internal/docstore"
)

// ExpireBatch is docstore.ExpireBatch, for storetest.RunRequestIDExpiry.
const ExpireBatch = docstore.ExpireBatch

// IsMarker reports whether a request document's name is a batch marker's
// (marker.go), which tests that count request ids leave out.
func IsMarker(name string) bool { return strings.HasPrefix(name, markerPrefix) }
