package server

import (
	"strconv"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/resp"
)

// Rankings over RESP (docs/RANKINGS.md): SC.TOP, and ZREVRANGE on a
// ranking's name, so that code reading a leaderboard kept with ZINCRBY
// reads a ranking unchanged. Rankings are defined over HTTP or the CLI.

func init() {
	for _, cmd := range []*command{
		{name: "sc.top", arity: -2, flags: fRead, firstKey: 1, lastKey: 1, step: 1, run: cmdSCTop, group: "shardcounter",
			summary: "A ranking's first k entries (default 10, 0 for all it keeps): entries as [id, value] pairs, as_of, max_staleness_ms, counters."},
		{name: "zrevrange", arity: -4, flags: fRead, firstKey: 1, lastKey: 1, step: 1, run: cmdZRevRange, group: "sorted-set",
			summary: "The entries start to stop (inclusive, negative from the end) of the ranking of that name, highest first, ties by id; WITHSCORES adds the values. A name that is no ranking is empty, as a missing key is."},
	} {
		register(cmd)
	}
}

// rankings returns the service's rankings, or replies with an error.
func rankings(c *conn) (shardcounter.RankingService, bool) {
	rs, ok := c.s.svc.(shardcounter.RankingService)
	if !ok {
		c.w.Error("ERR this server keeps no rankings")
	}
	return rs, ok
}

// rankingName checks a ranking's name, replying with an error when it is
// not one.
func rankingName(c *conn, b []byte) (string, bool) {
	name := string(b)
	if err := shardcounter.ValidateName("ranking name", name); err != nil {
		c.w.Error("ERR " + shardcounter.ErrorMessage(err))
		return "", false
	}
	return name, true
}

// cmdSCTop is SC.TOP name [k].
func cmdSCTop(c *conn, args [][]byte) {
	if len(args) > 3 {
		c.w.Error("ERR wrong number of arguments for 'sc.top' command")
		return
	}
	rs, ok := rankings(c)
	if !ok {
		return
	}
	name, ok := rankingName(c, args[1])
	if !ok {
		return
	}
	k := int64(10)
	if len(args) == 3 {
		if k, ok = resp.ParseInt(args[2]); !ok || shardcounter.CheckTopK(int(k)) != nil {
			c.w.Error("ERR k must be an integer from 0 (all) to " + strconv.Itoa(shardcounter.MaxRankingSize))
			return
		}
	}
	ctx, cancel := c.ctx()
	defer cancel()
	top, err := rs.Top(ctx, name, int(k))
	if err != nil {
		c.w.Error(errorReply(err))
		return
	}
	if !c.permitRanking("sc.top", top.Prefix) {
		return
	}
	c.w.Map(4)
	c.w.BulkString("entries")
	c.w.Array(len(top.Entries))
	for _, e := range top.Entries {
		c.w.Array(2)
		c.w.BulkString(e.ID)
		c.w.Int(e.Value)
	}
	c.w.BulkString("as_of")
	c.w.BulkString(top.AsOf.UTC().Format("2006-01-02T15:04:05.999999999Z07:00"))
	c.w.BulkString("max_staleness_ms")
	c.w.Int(top.MaxStalenessMS)
	c.w.BulkString("counters")
	c.w.Int(int64(top.Counters))
}

// cmdZRevRange is ZREVRANGE name start stop [WITHSCORES] on a ranking.
func cmdZRevRange(c *conn, args [][]byte) {
	withScores := false
	switch {
	case len(args) == 5 && lower(args[4]) == "withscores":
		withScores = true
	case len(args) != 4:
		c.w.Error(errSyntax)
		return
	}
	start, ok1 := resp.ParseInt(args[2])
	stop, ok2 := resp.ParseInt(args[3])
	if !ok1 || !ok2 {
		c.w.Error("ERR value is not an integer or out of range")
		return
	}
	rs, ok := rankings(c)
	if !ok {
		return
	}
	name, ok := rankingName(c, args[1])
	if !ok {
		return
	}
	k := 0 // the whole ranking, when an index counts from the end
	if start >= 0 && stop >= 0 {
		k = int(min(stop+1, shardcounter.MaxRankingSize))
	}
	ctx, cancel := c.ctx()
	defer cancel()
	top, err := rs.Top(ctx, name, k)
	if shardcounter.ErrorCode(err) == shardcounter.ENOTFOUND {
		c.w.Array(0) // as Redis answers for a missing key
		return
	}
	if err != nil {
		c.w.Error(errorReply(err))
		return
	}
	if !c.permitRanking("zrevrange", top.Prefix) {
		return
	}
	es := revRange(top.Entries, start, stop)
	switch {
	case !withScores:
		c.w.Array(len(es))
		for _, e := range es {
			c.w.BulkString(e.ID)
		}
	case c.w.Proto() == 3:
		c.w.Array(len(es))
		for _, e := range es {
			c.w.Array(2)
			c.w.BulkString(e.ID)
			c.w.Double(float64(e.Value))
		}
	default:
		c.w.Array(2 * len(es))
		for _, e := range es {
			c.w.BulkString(e.ID)
			c.w.BulkString(strconv.FormatInt(e.Value, 10)) // as Redis prints an integral score
		}
	}
}

// revRange returns entries start to stop, inclusive, with Redis's
// reading of indexes: negative ones count from the end, and a range out
// of bounds is cut to them or empty.
func revRange(es []shardcounter.RankingEntry, start, stop int64) []shardcounter.RankingEntry {
	n := int64(len(es))
	if start < 0 {
		start = max(n+start, 0)
	}
	if stop < 0 {
		stop = n + stop
	}
	stop = min(stop, n-1)
	if start > stop || start >= n {
		return nil
	}
	return es[start : stop+1]
}
