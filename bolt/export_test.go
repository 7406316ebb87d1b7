package bolt

import bbolt "go.etcd.io/bbolt"

// ExpireBatch is how many expired request ids a write deletes beyond those
// it records.
const ExpireBatch = expireBatch

// RequestIDs returns how many request ids the store keeps, and how many
// entries its index by time has, for tests of expiry.
func (s *CounterStore) RequestIDs() (ids, indexed int) {
	s.db.View(func(tx *bbolt.Tx) error {
		ids = tx.Bucket(bucketRequests).Stats().KeyN
		indexed = tx.Bucket(bucketByTime).Stats().KeyN
		return nil
	})
	return ids, indexed
}
