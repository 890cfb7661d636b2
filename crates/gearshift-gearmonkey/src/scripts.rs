//! The Lua scripts the bridge runs in Redis: each is one atomic step, so a
//! crash between two of them leaves every job in exactly one place.

use redis::Script;

/// Takes one job: a due entry of the scheduled set first (as the seed's
/// worker script), else the oldest of high, normal, low; the entry goes
/// into Gearshift's processing list in the same step.
/// KEYS: scheduled, high, normal, low, processing. ARGV: now (seconds).
/// Returns `{prio, id}` or nil.
pub fn take() -> Script {
    Script::new(
        r"
local item = redis.call('ZRANGEBYSCORE', KEYS[1], 0, ARGV[1], 'LIMIT', 0, 1)
if #item > 0 then
  redis.call('ZREM', KEYS[1], item[1])
  redis.call('LPUSH', KEYS[5], 'scheduled:' .. item[1])
  return {'scheduled', item[1]}
end
local names = {'high', 'normal', 'low'}
for i = 2, 4 do
  local id = redis.call('RPOP', KEYS[i])
  if id then
    redis.call('LPUSH', KEYS[5], names[i - 1] .. ':' .. id)
    return {names[i - 1], id}
  end
end
return false
",
    )
}

/// Puts one processing entry back: removed from the processing list and,
/// only if it was still there, pushed to the head of its queue (RPUSH:
/// workers pop from the right) or re-added to the scheduled set.
/// KEYS: processing, target. ARGV: entry, id, 'list' | 'zset', score.
pub fn put_back() -> Script {
    Script::new(
        r"
if redis.call('LREM', KEYS[1], 1, ARGV[1]) == 0 then return 0 end
if ARGV[3] == 'zset' then
  redis.call('ZADD', KEYS[2], ARGV[4], ARGV[2])
else
  redis.call('RPUSH', KEYS[2], ARGV[2])
end
return 1
",
    )
}

/// The roll call as a bridge before per-instance shares kept it (one
/// string per function); used at start to take such a share out.
/// KEYS: count, added. ARGV: workers now. Returns the change.
pub fn roll_call() -> Script {
    Script::new(
        r"
local old = tonumber(redis.call('GET', KEYS[2]) or '0') or 0
local want = tonumber(ARGV[1])
if want ~= old then redis.call('INCRBY', KEYS[1], want - old) end
if want == 0 then redis.call('DEL', KEYS[2]) else redis.call('SET', KEYS[2], want) end
return want - old
",
    )
}

/// Sets one instance's share of the roll call and marks it alive: the
/// count moves by the difference from the share's field, so a share another
/// instance took out (as dead) is added back whole.
/// KEYS: count, shares (hash), alive, the set of functions with shares.
/// ARGV: instance, workers now, alive ttl (ms), function. Returns the change.
pub fn set_share() -> Script {
    Script::new(
        r"
redis.call('SET', KEYS[3], '1', 'PX', ARGV[3])
local old = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0') or 0
local want = tonumber(ARGV[2])
if want ~= old then redis.call('INCRBY', KEYS[1], want - old) end
if want == 0 then
  redis.call('HDEL', KEYS[2], ARGV[1])
else
  redis.call('HSET', KEYS[2], ARGV[1], want)
  redis.call('SADD', KEYS[4], ARGV[4])
end
return want - old
",
    )
}

/// Takes out of the roll call the shares of instances whose liveness key
/// is gone (and of ARGV[2], when not empty). KEYS: count, shares, the set
/// of functions with shares. ARGV: function, an instance to take out
/// anyway, the liveness key prefix. Returns the workers taken out.
pub fn reap() -> Script {
    Script::new(
        r"
local all = redis.call('HGETALL', KEYS[2])
local gone = 0
for i = 1, #all, 2 do
  local inst, n = all[i], tonumber(all[i + 1]) or 0
  if inst == ARGV[2] or redis.call('EXISTS', ARGV[3] .. inst) == 0 then
    redis.call('INCRBY', KEYS[1], -n)
    redis.call('HDEL', KEYS[2], inst)
    gone = gone + n
  end
end
if redis.call('HLEN', KEYS[2]) == 0 then redis.call('SREM', KEYS[3], ARGV[1]) end
return gone
",
    )
}

/// Writes a Gearman job as a GearMonkey job once per Gearman handle: a job
/// Gearshift hands out again (after a restart) finds the id it got before.
/// A job due later goes into the scheduled set under its time.
/// KEYS: given (`gearshift:given:{FN}:{HANDLE}`), uid, channel.
/// ARGV: function, input, queue word, due (Unix seconds; for `scheduled`),
/// how long the mapping is kept (s). Returns `{created, id}`.
pub fn give() -> Script {
    Script::new(
        r"
local known = redis.call('GET', KEYS[1])
if known then return {0, known} end
local id = redis.call('INCR', KEYS[2])
local fn = ARGV[1]
redis.call('HSET', 'job:' .. fn .. ':' .. id, 'status', 'idle', 'input', ARGV[2])
redis.call('PUBLISH', KEYS[3], 'create:' .. id)
if ARGV[3] == 'scheduled' then
  redis.call('ZADD', 'queue:' .. fn .. ':scheduled', ARGV[4], id)
else
  redis.call('LPUSH', 'queue:' .. fn .. ':' .. ARGV[3], id)
end
redis.call('SET', KEYS[1], id, 'EX', ARGV[5])
return {1, tostring(id)}
",
    )
}
