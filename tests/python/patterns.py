"""patterns.py runs, with redis-py, what a Python application keeping its
counters in Redis does, and prints every answer as one JSON object:
transaction pipelines of INCR (redis-py's default pipeline is MULTI/EXEC),
hash counters per post, sets, TYPE, SCAN, EXISTS, DEL and DBSIZE.

resp/server's TestRedisPy runs it, unchanged, against a real redis-server
and against shardcounter's RESP port, and checks that the two print the
same. It starts with FLUSHALL (shardcounter: serve --resp-allow-flush).

    python3 -I tests/python/patterns.py HOST PORT
"""

import json
import sys

import redis


def error(e):
    """An error as the two servers are compared on: its class and the
    first word of its message (shardcounter's messages say more)."""
    return [type(e).__name__, str(e).split(" ")[0]]


def main():
    host, port = sys.argv[1], int(sys.argv[2])
    r = redis.Redis(host=host, port=port, decode_responses=True)
    out = {}
    r.flushall()

    # A rate limit: the default pipeline is a transaction.
    pipe = r.pipeline()
    pipe.incr("rate:alice")
    pipe.incr("rate:alice")
    pipe.incrby("rate:alice", 5)
    pipe.get("rate:alice")
    pipe.decr("rate:bob")
    out["tx"] = pipe.execute()
    with r.pipeline() as pipe:
        pipe.get("rate:alice")
        pipe.incr("rate:alice")
        pipe.get("rate:alice")
        out["tx_read_first"] = pipe.execute()

    # A command refused while queueing aborts the transaction: nothing of
    # it applies.
    pipe = r.pipeline()
    pipe.incr("rate:carol")
    pipe.execute_command("NOSUCHCOMMAND", "x")
    try:
        pipe.execute()
        out["execabort"] = "no error"
    except redis.RedisError as e:
        out["execabort"] = error(e)
    out["after_execabort"] = r.get("rate:carol")

    # A command that fails at EXEC fails alone; the others apply.
    pipe = r.pipeline()
    pipe.incr("rate:dave")
    pipe.sadd("rate:dave", "x")
    pipe.incr("rate:dave")
    res = pipe.execute(raise_on_error=False)
    out["tx_errors"] = [error(v) if isinstance(v, Exception) else v for v in res]

    # Hash counters, one hash per post.
    for post in range(4):
        for _ in range(post + 1):
            r.hincrby("post:%d" % post, "likes", 1)
        r.hincrby("post:%d" % post, "views", 10 * (post + 1))
    out["hgetall"] = {k: r.hgetall(k) for k in ("post:0", "post:1", "post:3", "post:9")}
    out["hget"] = [r.hget("post:1", "likes"), r.hget("post:1", "nope"), r.hget("post:9", "likes")]
    out["hmget"] = r.hmget("post:2", ["likes", "nope", "views"])
    out["hlen"] = [r.hlen("post:0"), r.hlen("post:9")]
    out["hexists"] = [r.hexists("post:0", "likes"), r.hexists("post:0", "nope")]
    out["hincrby_neg"] = r.hincrby("post:0", "likes", -3)
    out["hdel"] = [r.hdel("post:0", "views", "nope"), sorted(r.hkeys("post:0"))]
    out["hkeys"] = sorted(r.hkeys("post:3"))
    out["hvals"] = sorted(r.hvals("post:3"))
    out["hincrby_tx"] = r.pipeline().hincrby("post:3", "likes", 2).hget("post:3", "likes").execute()

    # Sets, and one type per name.
    out["sadd"] = [r.sadd("visitors", "a", "b", "c"), r.sadd("visitors", "a"), r.srem("visitors", "b")]
    out["smembers"] = sorted(r.smembers("visitors"))
    out["scard"] = r.scard("visitors")
    out["sismember"] = [r.sismember("visitors", "a"), r.sismember("visitors", "b")]
    out["type"] = [r.type(k) for k in ("rate:alice", "post:1", "visitors", "nope")]
    wrong = []
    for f in (lambda: r.incr("post:1"), lambda: r.hincrby("rate:alice", "f", 1), lambda: r.get("post:1"),
              lambda: r.sadd("post:1", "x"), lambda: r.hget("visitors", "x")):
        try:
            f()
            wrong.append("no error")
        except redis.RedisError as e:
            wrong.append(error(e))
    out["wrongtype"] = wrong

    # Listing, counting, deleting.
    out["scan_posts"] = sorted(r.scan_iter(match="post:*", count=2))
    out["scan_hashes"] = sorted(r.scan_iter(_type="hash"))
    out["scan_all"] = sorted(r.scan_iter(count=3))
    out["scan_first_page"] = len(r.scan(0, match="rate:*", count=1000)[1])
    out["exists"] = r.exists("post:1", "post:9", "rate:alice", "visitors")
    out["dbsize"] = r.dbsize()
    out["del"] = [r.delete("post:2", "rate:bob", "nope"), r.exists("post:2")]
    out["dbsize_after_del"] = r.dbsize()
    out["retyped"] = [r.incr("post:2"), r.type("post:2")]

    print(json.dumps(out, sort_keys=True, indent=1))


if __name__ == "__main__":
    main()
