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

/// Sets Gearshift's share of the roll call: `count:{FN}` moves by the
/// difference between what Gearshift added before (its own key) and now.
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

/// Writes a Gearman job as a GearMonkey job once per Gearman handle: a job
/// Gearshift hands out again (after a restart) finds the id it got before.
/// KEYS: given (`gearshift:given:{FN}:{HANDLE}`), uid, channel.
/// ARGV: function, input, priority word. Returns `{created, id}`.
pub fn give() -> Script {
    Script::new(
        r"
local known = redis.call('GET', KEYS[1])
if known then return {0, known} end
local id = redis.call('INCR', KEYS[2])
local fn = ARGV[1]
redis.call('HSET', 'job:' .. fn .. ':' .. id, 'status', 'idle', 'input', ARGV[2])
redis.call('PUBLISH', KEYS[3], 'create:' .. id)
redis.call('LPUSH', 'queue:' .. fn .. ':' .. ARGV[3], id)
redis.call('SET', KEYS[1], id, 'EX', 90000)
return {1, tostring(id)}
",
    )
}
