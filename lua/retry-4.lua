--[[
  retry: the lease holder gives a job back after a failure. Below
  max_attempts it waits in the schedule for delay_ms; at max_attempts it goes
  to the dead set. last_error is kept either way. Backoff policy is the
  caller's: the delay arrives already computed.

  Input:
    KEYS[1] active set        emq:{q}:active
    KEYS[2] schedule set      emq:{q}:schedule (score = run-at, server ms)
    KEYS[3] dead set          emq:{q}:dead (score 0, mint order)
    KEYS[4] job row           emq:{q}:job:<id>
    ARGV[1] id                14-byte JOB id
    ARGV[2] token             integer, 1 to 2^53
    ARGV[3] error             text kept as last_error
    ARGV[4] delay_ms          integer, 0 to 2^31-1
    ARGV[5] max_attempts      integer, 1 to 2^31-1

  Reply:
    "scheduled"  attempts < max_attempts: state scheduled, run-at now+delay
    "dead"       attempts >= max_attempts: state dead, in the dead set

  Errors:
    EMQID, EMQKIND, EMQARG (token, delay_ms or max_attempts), EMQSTALE
]]
--- @include "checkJobId"
--- @include "toInt"
local rcall = redis.call
local activeKey = KEYS[1]
local scheduleKey = KEYS[2]
local deadKey = KEYS[3]
local jobKey = KEYS[4]
local id = ARGV[1]
local token = toInt(ARGV[2], 1, 9007199254740992)
local lastError = ARGV[3]
local delay = toInt(ARGV[4], 0, 2147483647)
local maxAttempts = toInt(ARGV[5], 1, 2147483647)

local err = checkJobId(id)
if err then return err end
if not token then
  return redis.error_reply('EMQARG token must be an integer from 1 to 2^53')
end
if not delay then
  return redis.error_reply('EMQARG delay_ms must be an integer from 0 to 2147483647')
end
if not maxAttempts then
  return redis.error_reply('EMQARG max_attempts must be an integer from 1 to 2147483647')
end

local row = rcall('HMGET', jobKey, 'state', 'attempts')
if row[1] ~= 'active' or tonumber(row[2]) ~= token then
  return redis.error_reply('EMQSTALE token ' .. ARGV[2] .. ' does not hold the lease on ' .. id)
end
rcall('ZREM', activeKey, id)
if token < maxAttempts then
  local t = rcall('TIME')
  local now = t[1] * 1000 + math.floor(t[2] / 1000)
  rcall('ZADD', scheduleKey, now + delay, id)
  rcall('HSET', jobKey, 'state', 'scheduled', 'last_error', lastError)
  return 'scheduled'
end
rcall('ZADD', deadKey, 0, id)
rcall('HSET', jobKey, 'state', 'dead', 'last_error', lastError)
return 'dead'
