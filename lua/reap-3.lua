--[[
  reap: return expired leases (deadline <= now) to pending. A job whose
  attempts already reached max_attempts goes to the dead set instead, with
  last_error "lease expired". One of the two pumps; the lease is the only
  crash detector, so no heartbeat exists to consult.

  Input:
    KEYS[1] active set        emq:{q}:active (score = lease deadline, server ms)
    KEYS[2] pending set       emq:{q}:pending
    KEYS[3] dead set          emq:{q}:dead
    ARGV[1] job key prefix    emq:{q}:job:
    ARGV[2] limit             integer, 1 to 100000: the cap (product default 100)
    ARGV[3] max_attempts      integer, 1 to 2^31-1

  Reply:
    count reaped (integer), never more than limit

  Errors:
    EMQARG  limit or max_attempts is not an integer in range

  Cost is O(log M + k) for an active set of M and k expired: the expired
  leases are the k lowest deadlines.
]]
--- @include "toInt"
--- @include "zaddZero"
local rcall = redis.call
local activeKey = KEYS[1]
local pendingKey = KEYS[2]
local deadKey = KEYS[3]
local jobPrefix = ARGV[1]
local limit = toInt(ARGV[2], 1, 100000)
local maxAttempts = toInt(ARGV[3], 1, 2147483647)

if not limit then
  return redis.error_reply('EMQARG limit must be an integer from 1 to 100000')
end
if not maxAttempts then
  return redis.error_reply('EMQARG max_attempts must be an integer from 1 to 2147483647')
end

local t = rcall('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local expired = rcall('ZRANGE', activeKey, '-inf', now, 'BYSCORE', 'LIMIT', 0, limit)
if #expired == 0 then return 0 end
rcall('ZREMRANGEBYRANK', activeKey, 0, #expired - 1)
local back, dead = {}, {}
for i = 1, #expired do
  local jobKey = jobPrefix .. expired[i]
  if tonumber(rcall('HGET', jobKey, 'attempts')) >= maxAttempts then
    rcall('HSET', jobKey, 'state', 'dead', 'last_error', 'lease expired')
    dead[#dead + 1] = expired[i]
  else
    rcall('HSET', jobKey, 'state', 'pending')
    back[#back + 1] = expired[i]
  end
end
if #back > 0 then zaddZero(pendingKey, back) end
if #dead > 0 then zaddZero(deadKey, dead) end
return #expired
