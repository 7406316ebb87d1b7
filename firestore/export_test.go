package firestore

// ExpireBatch is expireBatch, for storetest.RunRequestIDExpiry.
const ExpireBatch = expireBatch
