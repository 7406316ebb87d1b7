package main

import (
	"context"
	"flag"
	"fmt"
	"runtime/debug"
)

// versionCommand is `shardcounter version`: the module version the binary
// was built from, or "devel" for a build from a work tree.
type versionCommand struct{ m *Main }

func newVersionCommand(m *Main) command { return &versionCommand{m: m} }

func (c *versionCommand) flags(fs *flag.FlagSet) {}

func (c *versionCommand) run(ctx context.Context, args []string) error {
	if len(args) != 0 {
		return usagef("version takes no arguments")
	}
	_, err := fmt.Fprintf(c.m.Stdout, "shardcounter %s\n", Version())
	return err
}

// Version returns the module version from the build information, or
// "devel" when there is none (go run, a build from a work tree).
func Version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok || info.Main.Version == "" || info.Main.Version == "(devel)" {
		return "devel"
	}
	return info.Main.Version
}
