package bolt

import bbolt "go.etcd.io/bbolt"

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
