package datastore

// ExpireBatch is expireBatch, for storetest.RunRequestIDExpiry.
const ExpireBatch = expireBatch
