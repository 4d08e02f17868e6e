--[[
  claim: hand out the oldest pending job under a lease on the server's clock.

  Input:
    KEYS[1] pending set       emq:{q}:pending
    KEYS[2] active set        emq:{q}:active (score = lease deadline, server ms)
    ARGV[1] job key prefix    emq:{q}:job:
    ARGV[2] lease_ms          integer, 1 to 2^31-1

  Reply:
    {id, payload, token}  token is the job's attempts after this claim
    {}                    pending is empty

  Errors:
    EMQARG  lease_ms is not an integer in range

  The job key is built from the prefix because the id is unknown until it is
  popped; the prefix carries the queue's hash tag, so the row lives in the
  same cluster slot as the declared keys.
]]
--- @include "toInt"
local rcall = redis.call
local pendingKey = KEYS[1]
local activeKey = KEYS[2]
local jobPrefix = ARGV[1]
local lease = toInt(ARGV[2], 1, 2147483647)

if not lease then
  return redis.error_reply('EMQARG lease_ms must be an integer from 1 to 2147483647')
end

local popped = rcall('ZPOPMIN', pendingKey)
if #popped == 0 then return {} end
local id = popped[1]
local jobKey = jobPrefix .. id
local token = rcall('HINCRBY', jobKey, 'attempts', 1)
rcall('HSET', jobKey, 'state', 'active')
local t = rcall('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
rcall('ZADD', activeKey, now + lease, id)
return {id, rcall('HGET', jobKey, 'payload'), token}
