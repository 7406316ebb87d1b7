package datastore_test

import (
	"testing"

	"github.com/shardcounter/shardcounter/datastore"
	"github.com/shardcounter/shardcounter/internal/firestoretest"
	"github.com/shardcounter/shardcounter/storetest"
)

// TestApproxTwoProcesses writes one approx counter from two stores on one
// database (storetest.RunApproxTwoStores).
func TestApproxTwoProcesses(t *testing.T) {
	project := firestoretest.Project(t)
	storetest.RunApproxTwoStores(t, mustOpenProject(t, project, datastore.Options{}), mustOpenProject(t, project, datastore.Options{}))
}
