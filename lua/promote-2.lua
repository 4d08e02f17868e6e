--[[
  promote: move due retries (run-at <= now) from the schedule back to pending.
  One of the two pumps; the caller drives it on a cadence with its batch.

  Input:
    KEYS[1] schedule set      emq:{q}:schedule (score = run-at, server ms)
    KEYS[2] pending set       emq:{q}:pending
    ARGV[1] job key prefix    emq:{q}:job:
    ARGV[2] limit             integer, 1 to 100000: at most this many move

  Reply:
    count moved (integer)

  Errors:
    EMQARG  limit is not an integer in range

  Cost is O(log N + k): the due entries are the k lowest scores, so one
  range read finds them and one rank-range delete removes them.
]]
--- @include "toInt"
--- @include "zaddZero"
local rcall = redis.call
local scheduleKey = KEYS[1]
local pendingKey = KEYS[2]
local jobPrefix = ARGV[1]
local limit = toInt(ARGV[2], 1, 100000)

if not limit then
  return redis.error_reply('EMQARG limit must be an integer from 1 to 100000')
end

local t = rcall('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local due = rcall('ZRANGE', scheduleKey, '-inf', now, 'BYSCORE', 'LIMIT', 0, limit)
if #due == 0 then return 0 end
rcall('ZREMRANGEBYRANK', scheduleKey, 0, #due - 1)
for i = 1, #due do
  rcall('HSET', jobPrefix .. due[i], 'state', 'pending')
end
zaddZero(pendingKey, due)
return #due
