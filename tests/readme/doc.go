// Package readme tests README.md as a newcomer uses it: readme_test.go
// builds the shardcounter binary from this tree and runs every fenced sh
// block of the README, in order, as written, comparing what each command
// prints with its comment. It holds no code of its own.
package readme
