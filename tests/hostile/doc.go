// Package hostile tests the server as an attacker and a careless client
// would use it: hostile_test.go starts the real shardcounter binary's
// serve, with a token file, and talks to its HTTP and RESP ports, one
// test for each numbered point of the issue that found the holes
// (invalid text, empty request ids, unauthenticated RESP memory, revoked
// tokens, bodies in flight, out of range on totals, failed
// authentications, and the smaller points), and then the shapes of bodies
// that decode into more than their bytes (Test9BodyShapes). It holds no
// code of its own.
package hostile
