// ioredis.mjs drives shardcounter's RESP front end with ioredis, as a
// Node.js application would: INCR, GET and MGET one at a time and
// pipelined, multi() transactions, hash counters and scanStream. resp/server's TestIoredis runs it as
//
//	node tests/node/ioredis.mjs HOST PORT
//
// It prints "ok" and exits 0 when every reply is as expected, and says
// what differed and exits 1 otherwise.
import Redis from "ioredis";

const [host, port] = process.argv.slice(2);
const redis = new Redis({ host, port: Number(port), maxRetriesPerRequest: 0, enableOfflineQueue: true });
const failures = [];

function expect(what, got, want) {
  if (JSON.stringify(got) !== JSON.stringify(want)) {
    failures.push(`${what}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
  }
}

try {
  // One command at a time.
  expect("INCR", await redis.incr("likes"), 1);
  expect("INCRBY", await redis.incrby("likes", 41), 42);
  expect("DECR", await redis.decr("likes"), 41);
  expect("GET", await redis.get("likes"), "41");
  expect("GET missing", await redis.get("missing"), null);
  expect("MGET", await redis.mget("likes", "missing"), ["41", null]);
  try {
    await redis.incrby("likes", "x");
    failures.push("INCRBY x: no error");
  } catch (err) {
    expect("INCRBY x", err.message, "ERR value is not an integer or out of range");
  }

  // Pipelined: the INCRs commit together, and the reads after them see
  // them all.
  const n = 50;
  const p = redis.pipeline();
  for (let i = 0; i < n; i++) p.incr("hot");
  p.get("hot");
  p.mget("hot", "likes", "missing");
  const results = await p.exec();
  let prev = 0;
  results.slice(0, n).forEach(([err, v], i) => {
    if (err) failures.push(`pipelined INCR ${i}: ${err.message}`);
    else if (v < prev || v > n) failures.push(`pipelined INCR ${i}: ${v} after ${prev}`);
    else prev = v;
  });
  expect("last pipelined INCR", prev, n);
  expect("pipelined GET", results[n], [null, String(n)]);
  expect("pipelined MGET", results[n + 1], [null, [String(n), "41", null]]);

  // A transaction, as multi() sends it: every reply, the INCRs of one
  // counter replying 1, 2 as on Redis.
  const tx = await redis.multi().incr("rate").incr("rate").incrby("rate", 5).get("rate").exec();
  expect("multi().exec()", tx, [[null, 1], [null, 2], [null, 7], [null, "7"]]);
  try {
    await redis.multi().incr("aborted").call("NOSUCHCOMMAND").exec();
    failures.push("multi() with an unknown command: no error");
  } catch (err) {
    expect("EXECABORT", err.message.split(" ")[0], "EXECABORT");
  }
  expect("GET after EXECABORT", await redis.get("aborted"), null);

  // Hash counters, per post.
  for (let post = 0; post < 3; post++) {
    for (let i = 0; i <= post; i++) await redis.hincrby(`post:${post}`, "likes", 1);
    await redis.hincrby(`post:${post}`, "views", 10);
  }
  expect("HGETALL", await redis.hgetall("post:2"), { likes: "3", views: "10" });
  expect("HGET", await redis.hget("post:1", "likes"), "2");
  expect("HMGET", await redis.hmget("post:0", "likes", "nope"), ["1", null]);
  expect("HLEN", await redis.hlen("post:0"), 2);
  expect("HDEL", await redis.hdel("post:0", "views"), 1);
  expect("TYPE", await redis.type("post:1"), "hash");
  try {
    await redis.incr("post:1");
    failures.push("INCR on a hash: no error");
  } catch (err) {
    expect("INCR on a hash", err.message.split(" ")[0], "WRONGTYPE");
  }

  // SCAN, through scanStream.
  const scanned = [];
  await new Promise((resolve, reject) => {
    const stream = redis.scanStream({ match: "post:*", count: 1 });
    stream.on("data", (keys) => scanned.push(...keys));
    stream.on("end", resolve);
    stream.on("error", reject);
  });
  expect("scanStream", scanned.sort(), ["post:0", "post:1", "post:2"]);

  // Unique visitors: PFADD per visitor, from several connections.
  expect("PFADD", await redis.pfadd("uv", "a", "b", "c"), 1);
  expect("PFADD of counted members", await redis.pfadd("uv", "a", "b"), 0);
  expect("PFCOUNT", await redis.pfcount("uv"), 3);
  await redis.pfadd("uv:2", "c", "d");
  expect("PFCOUNT of two", await redis.pfcount("uv", "uv:2"), 4);
  expect("PFMERGE", await redis.pfmerge("uv:all", "uv", "uv:2"), "OK");
  expect("PFCOUNT of the merge", await redis.pfcount("uv:all"), 4);
  expect("TYPE of a HyperLogLog", await redis.type("uv"), "string");
  try {
    await redis.pfadd("post:1", "x");
    failures.push("PFADD on a hash: no error");
  } catch (err) {
    expect("PFADD on a hash", err.message.split(" ")[0], "WRONGTYPE");
  }

  // Many connections at once, each pipelining.
  const clients = Array.from({ length: 8 }, () => new Redis({ host, port: Number(port), maxRetriesPerRequest: 0 }));
  await Promise.all(clients.map((c) => {
    const q = c.pipeline();
    for (let i = 0; i < 25; i++) q.incr("shared");
    return q.exec();
  }));
  expect("GET after 8 pipelines of 25", await redis.get("shared"), "200");
  await Promise.all(clients.map((c, k) => {
    const q = c.pipeline();
    for (let i = 0; i < 250; i++) q.pfadd("uv:many", `v${(k * 250 + i) % 1000}`);
    return q.exec();
  }));
  const many = await redis.pfcount("uv:many");
  expect("PFCOUNT of 1000 visitors within 3 %", Math.abs(many - 1000) <= 30, true);
  await Promise.all(clients.map((c) => c.quit()));
} catch (err) {
  failures.push(`unexpected error: ${err.stack || err}`);
} finally {
  redis.disconnect();
}

if (failures.length > 0) {
  console.error(failures.join("\n"));
  process.exit(1);
}
console.log("ok");
