package redis

import (
	"net"
	"net/url"
	"strconv"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardcounter/shardcounter"
)

// DSN is a parsed Redis store DSN.
type DSN struct {
	Cluster  bool     // redis+cluster://
	Addrs    []string // host:port; one for a server, the seed nodes of a cluster
	DB       int      // database number of a server; always 0 on a cluster
	Username string
	Password string
}

// ParseDSN parses the store DSNs of the redis package:
//
//	redis://[[USER]:PASS@]HOST:PORT[/DB]
//	redis+cluster://[[USER]:PASS@]HOST:PORT[?addr=HOST:PORT&addr=HOST:PORT...]
//
// The port is required. The cluster form names seed nodes: the host of the
// URL and every addr parameter; the client learns the rest of the cluster
// from them. Anything else (another scheme, a query parameter other than
// addr, a path on a cluster DSN) is ErrInvalid with a message that says
// what to change, so a typo fails at start rather than being ignored.
func ParseDSN(dsn string) (*DSN, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return nil, invalidDSN(dsn, "not a URL: %v", err)
	}
	d := &DSN{}
	switch u.Scheme {
	case "redis":
	case "redis+cluster":
		d.Cluster = true
	default:
		return nil, invalidDSN(dsn, "scheme %q is not redis:// or redis+cluster://", u.Scheme)
	}
	if u.Opaque != "" {
		return nil, invalidDSN(dsn, "write it as %s://HOST:PORT", u.Scheme)
	}
	if u.User != nil {
		d.Username = u.User.Username()
		d.Password, _ = u.User.Password()
	}
	if u.Fragment != "" || u.RawFragment != "" {
		return nil, invalidDSN(dsn, "remove the #fragment")
	}
	addr, err := hostPort(u.Host)
	if err != nil {
		return nil, invalidDSN(dsn, "%v", err)
	}
	d.Addrs = []string{addr}

	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, invalidDSN(dsn, "bad query: %v", err)
	}
	for k, vs := range q {
		if k != "addr" || !d.Cluster {
			if d.Cluster {
				return nil, invalidDSN(dsn, "unknown parameter %q: only addr=HOST:PORT is accepted", k)
			}
			return nil, invalidDSN(dsn, "unknown parameter %q: a redis:// DSN takes none", k)
		}
		for _, v := range vs {
			a, err := hostPort(v)
			if err != nil {
				return nil, invalidDSN(dsn, "addr=%q: %v", v, err)
			}
			d.Addrs = append(d.Addrs, a)
		}
	}

	switch p := strings.TrimPrefix(u.Path, "/"); {
	case p == "":
	case d.Cluster:
		return nil, invalidDSN(dsn, "a cluster has no database number: remove the path /%s", p)
	default:
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || strconv.Itoa(n) != p {
			return nil, invalidDSN(dsn, "database %q is not a number: write /0, /1, ...", p)
		}
		d.DB = n
	}
	return d, nil
}

func hostPort(s string) (string, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil || host == "" {
		return "", shardcounter.Errorf(shardcounter.EINVALID, "%q is not HOST:PORT (the port is required, e.g. localhost:6379)", s)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
		return "", shardcounter.Errorf(shardcounter.EINVALID, "port %q is not a number from 1 to 65535", port)
	}
	return net.JoinHostPort(host, port), nil
}

func invalidDSN(dsn, format string, args ...any) error {
	e := shardcounter.Errorf(shardcounter.EINVALID, format, args...)
	e.Message = "redis DSN " + strconv.Quote(redact(dsn)) + ": " + e.Message
	return e
}

// redact hides the password of a DSN that may not parse.
func redact(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
			return u.String()
		}
	}
	if i, j := strings.Index(dsn, "://"), strings.LastIndex(dsn, "@"); i >= 0 && j > i {
		return dsn[:i+3] + "xxxxx" + dsn[j:]
	}
	return dsn
}

// String returns the DSN with its password replaced by xxxxx, for logs.
func (d *DSN) String() string {
	u := url.URL{Scheme: "redis", Host: d.Addrs[0]}
	if d.Cluster {
		u.Scheme = "redis+cluster"
		for i, a := range d.Addrs[1:] {
			if i > 0 {
				u.RawQuery += "&"
			}
			u.RawQuery += "addr=" + a
		}
	} else if d.DB != 0 {
		u.Path = "/" + strconv.Itoa(d.DB)
	}
	if d.Password != "" {
		u.User = url.UserPassword(d.Username, "xxxxx")
	} else if d.Username != "" {
		u.User = url.User(d.Username)
	}
	return u.String()
}

// Options returns go-redis options for the single server of a redis://
// DSN, with the store's timeouts and with retries off (see New).
func (d *DSN) Options() *goredis.Options {
	return &goredis.Options{
		Addr:                  d.Addrs[0],
		Username:              d.Username,
		Password:              d.Password,
		DB:                    d.DB,
		MaxRetries:            -1,
		DialTimeout:           DefaultDialTimeout,
		DialerRetries:         1,
		ReadTimeout:           DefaultIOTimeout,
		WriteTimeout:          DefaultIOTimeout,
		PoolTimeout:           DefaultIOTimeout,
		ContextTimeoutEnabled: true,
	}
}

// ClusterOptions returns go-redis options for the cluster of a
// redis+cluster:// DSN, with the store's timeouts and with retries and
// redirects off (see New): the store itself retries a command that the
// cluster redirected, after the client has reloaded the slot map.
func (d *DSN) ClusterOptions() *goredis.ClusterOptions {
	return &goredis.ClusterOptions{
		Addrs:                  d.Addrs,
		Username:               d.Username,
		Password:               d.Password,
		MaxRedirects:           -1,
		MaxRetries:             -1,
		DialTimeout:            DefaultDialTimeout,
		DialerRetries:          1,
		ReadTimeout:            DefaultIOTimeout,
		WriteTimeout:           DefaultIOTimeout,
		PoolTimeout:            DefaultIOTimeout,
		ContextTimeoutEnabled:  true,
		DisableRoutingPolicies: true,
	}
}
