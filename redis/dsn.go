package redis

import (
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

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
	// WaitReplicas (wait_replicas=N) is how many replicas must confirm a
	// write before it is acknowledged (Options.WaitReplicas); 0 when not
	// given. WaitTimeout (wait_timeout_ms=T) bounds that wait; 0 when not
	// given (Options' default then applies).
	WaitReplicas int
	WaitTimeout  time.Duration
}

// Limits of the wait parameters of a DSN.
const (
	maxWaitReplicas = 100
	maxWaitTimeout  = time.Minute
)

// ParseDSN parses the store DSNs of the redis package:
//
//	redis://[[USER]:PASS@]HOST:PORT[/DB][?wait_replicas=N[&wait_timeout_ms=T]]
//	redis+cluster://[[USER]:PASS@]HOST:PORT[?addr=HOST:PORT&addr=HOST:PORT...][&wait_replicas=N[&wait_timeout_ms=T]]
//
// The port is required. The cluster form names seed nodes: the host of the
// URL and every addr parameter; the client learns the rest of the cluster
// from them. wait_replicas (1 to 100) makes every write wait until that
// many replicas of each master it wrote have it, for at most
// wait_timeout_ms milliseconds (1 to 60000, default 1000): see
// Options.WaitReplicas. Anything else (another scheme, another query
// parameter, a parameter given twice, a number not written plainly, a
// path on a cluster DSN) is ErrInvalid with a message that says what to
// change, so a typo fails at start rather than being ignored.
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
		switch {
		case k == "addr" && d.Cluster:
			for _, v := range vs {
				a, err := hostPort(v)
				if err != nil {
					return nil, invalidDSN(dsn, "addr=%q: %v", v, err)
				}
				d.Addrs = append(d.Addrs, a)
			}
		case k == "wait_replicas" || k == "wait_timeout_ms":
			if len(vs) != 1 {
				return nil, invalidDSN(dsn, "%s is given %d times: give it once", k, len(vs))
			}
			if k == "wait_replicas" {
				var ok bool
				if d.WaitReplicas, ok = plainInt(vs[0], 1, maxWaitReplicas); !ok {
					return nil, invalidDSN(dsn, "wait_replicas=%q: give the number of replicas, 1 to %d", vs[0], maxWaitReplicas)
				}
			} else {
				ms, ok := plainInt(vs[0], 1, int(maxWaitTimeout.Milliseconds()))
				if !ok {
					return nil, invalidDSN(dsn, "wait_timeout_ms=%q: give milliseconds, 1 to %d", vs[0], maxWaitTimeout.Milliseconds())
				}
				d.WaitTimeout = time.Duration(ms) * time.Millisecond
			}
		case d.Cluster:
			return nil, invalidDSN(dsn, "unknown parameter %q: a redis+cluster:// DSN takes addr, wait_replicas and wait_timeout_ms", k)
		default:
			return nil, invalidDSN(dsn, "unknown parameter %q: a redis:// DSN takes wait_replicas and wait_timeout_ms", k)
		}
	}
	if d.WaitTimeout != 0 && d.WaitReplicas == 0 {
		return nil, invalidDSN(dsn, "wait_timeout_ms without wait_replicas: add wait_replicas=N, or remove it")
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

// plainInt parses a decimal integer in [lo, hi] written plainly: digits
// only, no sign, no leading zero.
func plainInt(s string, lo, hi int) (int, bool) {
	n, err := strconv.Atoi(s)
	if err != nil || strconv.Itoa(n) != s || n < lo || n > hi {
		return 0, false
	}
	return n, true
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
	var q []string
	if d.Cluster {
		u.Scheme = "redis+cluster"
		for _, a := range d.Addrs[1:] {
			q = append(q, "addr="+a)
		}
	} else if d.DB != 0 {
		u.Path = "/" + strconv.Itoa(d.DB)
	}
	if d.WaitReplicas != 0 {
		q = append(q, "wait_replicas="+strconv.Itoa(d.WaitReplicas))
	}
	if d.WaitTimeout != 0 {
		q = append(q, "wait_timeout_ms="+strconv.FormatInt(d.WaitTimeout.Milliseconds(), 10))
	}
	u.RawQuery = strings.Join(q, "&")
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
		ReadTimeout:           d.readTimeout(),
		WriteTimeout:          DefaultIOTimeout,
		PoolTimeout:           DefaultIOTimeout,
		ContextTimeoutEnabled: true,
	}
}

// readTimeout is DefaultIOTimeout, or longer when a WAIT may take longer:
// a reply that comes late must not be taken for a lost one.
func (d *DSN) readTimeout() time.Duration {
	return max(DefaultIOTimeout, d.WaitTimeout+time.Second)
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
		ReadTimeout:            d.readTimeout(),
		WriteTimeout:           DefaultIOTimeout,
		PoolTimeout:            DefaultIOTimeout,
		ContextTimeoutEnabled:  true,
		DisableRoutingPolicies: true,
	}
}
