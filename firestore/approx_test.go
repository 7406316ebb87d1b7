package firestore_test

import (
	"testing"

	"github.com/shardcounter/shardcounter/firestore"
	"github.com/shardcounter/shardcounter/internal/firestoretest"
	"github.com/shardcounter/shardcounter/storetest"
)

// TestApproxTwoProcesses writes one approx counter from two stores on one
// database (storetest.RunApproxTwoStores).
func TestApproxTwoProcesses(t *testing.T) {
	project := firestoretest.Project(t)
	storetest.RunApproxTwoStores(t, mustOpenProject(t, project, firestore.Options{}), mustOpenProject(t, project, firestore.Options{}))
}
