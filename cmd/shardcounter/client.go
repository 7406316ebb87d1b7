package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/shardcounter/shardcounter"
	shttp "github.com/shardcounter/shardcounter/http"
)

// DefaultServer is the server client subcommands talk to unless
// --server or SHARDCOUNTER_SERVER says otherwise.
const DefaultServer = "http://127.0.0.1:8080"

// clientFlags are the flags every client subcommand shares.
type clientFlags struct {
	m         *Main
	server    string
	tokenFile string
	user      string
	json      bool
}

func (c *clientFlags) register(fs *flag.FlagSet) {
	c.registerServer(fs)
	fs.BoolVar(&c.json, "json", false, "print the API's JSON instead of text")
}

// registerServer registers --server and --token-file alone.
func (c *clientFlags) registerServer(fs *flag.FlagSet) {
	server := c.m.Getenv("SHARDCOUNTER_SERVER")
	if server == "" {
		server = DefaultServer
	}
	fs.StringVar(&c.server, "server", server, "server `URL` (env SHARDCOUNTER_SERVER)")
	fs.StringVar(&c.tokenFile, "token-file", "", "read the bearer token, or --user's password, from the first line of `PATH`")
	fs.StringVar(&c.user, "user", c.m.Getenv("SHARDCOUNTER_USER"), "authenticate as `NAME`, a user of the server's --users-file, with the password of --token-file (env SHARDCOUNTER_USER)")
}

// client returns the API client the flags describe.
func (c *clientFlags) client() (*shttp.Client, error) {
	u, err := url.Parse(c.server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usagef("--server %q is not an http:// or https:// URL: give one such as %s", c.server, DefaultServer)
	}
	client := shttp.NewClient(c.server)
	if c.tokenFile != "" {
		b, err := os.ReadFile(c.tokenFile)
		if err != nil {
			return nil, fmt.Errorf("cannot read --token-file: %w", err)
		}
		token, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
		if token = strings.TrimSpace(token); token == "" {
			return nil, fmt.Errorf("--token-file %s is empty: put the token on its first line", c.tokenFile)
		}
		client.Token = token
	}
	if c.user != "" {
		if client.Token == "" {
			return nil, usagef("--user %s needs --token-file with the user's password", c.user)
		}
		client.User = c.user
	}
	return client, nil
}

// printJSON prints v as one line of JSON, as the API sends it.
func (c *clientFlags) printJSON(v any) error {
	return json.NewEncoder(c.m.Stdout).Encode(v)
}

// counterClient returns the one positional argument, a counter id, and
// the API client: how every command on one counter starts, once it has
// checked its own flags.
func (c *clientFlags) counterClient(args []string) (string, *shttp.Client, error) {
	if len(args) != 1 {
		return "", nil, usagef("expected one counter ID, got %d arguments", len(args))
	}
	if err := checkArg("counter id", args[0]); err != nil {
		return "", nil, err
	}
	client, err := c.client()
	return args[0], client, err
}

// showID is how the CLI prints a counter id: as it is, but for the id of
// a hash's field or marker (RESP's HINCRBY post:42 likes writes counter
// "post:42" U+001F "likes"), which it prints quoted with Go's escapes,
// "post:42\x1flikes", so that the separator shows. An id that starts with
// a double quote is quoted too, so that no two ids print alike. In a shell
// $'post:42\x1flikes' names that counter again (docs/CLI.md).
func showID(id string) string {
	if strings.Contains(id, shardcounter.HashSeparator) || strings.HasPrefix(id, `"`) {
		return strconv.Quote(id)
	}
	return id
}

// checkArg checks a positional argument that names a counter, member or
// collection; what ValidateID refuses is a usage error.
func checkArg(kind, arg string) error {
	if err := shardcounter.ValidateID(kind, arg); err != nil {
		return usagef("%s", shardcounter.ErrorMessage(err))
	}
	return nil
}

// allPages follows a listing's page tokens. page returns up to limit items
// after position after, and the position of the next page ("" after the
// last). It stops once it has most items (0: no most).
func allPages[T any](most int, page func(limit int, after string) ([]T, string, error)) ([]T, error) {
	all := []T{}
	after := ""
	for {
		limit := shardcounter.MaxListLimit
		if most > 0 {
			limit = min(limit, most-len(all))
		}
		items, next, err := page(limit, after)
		if err != nil {
			return nil, err
		}
		all = append(all, items...)
		if next == "" || (most > 0 && len(all) >= most) {
			return all, nil
		}
		after = next
	}
}

// errorText is how a runtime error is shown: the message for people and,
// for API errors, the code in parentheses for scripts and searches.
func errorText(err error) string {
	var e *shardcounter.Error
	if errors.As(err, &e) {
		msg := e.Message
		if e.Code == shardcounter.ENOTFOUND {
			msg += ": check the id, or create the counter with shardcounter create"
		}
		return fmt.Sprintf("%s (%s)", msg, e.Code)
	}
	return err.Error()
}
