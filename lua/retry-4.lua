--[[
  retry: the lease holder gives a job back after a failure. Below
  max_attempts it waits in the schedule for delay_ms; at max_attempts it goes
  to the dead set. last_error is kept either way. Backoff policy is the
  caller's: the delay arrives already computed.
  Contract: docs/contract.md (keys, replies, errors, invariants).

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
    EMQID     malformed id
    EMQKIND   the id's kind is not JOB
    EMQARG    the call has not 4 KEYS and 5 ARGV, the job row is not the row
              of id beside the active set, or token, delay_ms or
              max_attempts is not an integer in range
    EMQSTALE  the job is not active, or its attempts moved past this token
    EMQDAMAGE the row's key holds another type, or the active set or the
              set the job moves to another type than a sorted set; nothing
              moves

  Cost: a healthy call is one HMGET, one TYPE of the set the job moves to,
  one ZREM, (TIME,) one ZADD and one HSET, after the counts of KEYS and
  ARGV. It is accepted at once when the row is active at exactly the token
  text sent and is the row of id beside the active set (as in complete:
  only claim writes state active, after checking the id, with an attempts
  of plain digits), and delay_ms and max_attempts pass one pattern match
  each. Any other call, or a ZREM the server refuses (which has written
  nothing), runs the full checks from the start, in the contract's order.
]]
local rcall = redis.call
-- KEYS and ARGV are named once each: the global lookups this saves pay for the test of
-- their counts. Every script spells the refusal inline in the same words (a test holds
-- them equal): a shared helper put a function in every script, and counted, that cost
-- even the verbs that never call it.
local keys, argv = KEYS, ARGV
if #keys ~= 4 or #argv ~= 5 then
  return redis.error_reply('EMQARG retry takes 4 keys and 5 arguments, got ' .. #keys .. ' and ' .. #argv)
end
local activeKey = keys[1]
local scheduleKey = keys[2]
local deadKey = keys[3]
local jobKey = keys[4]
local id = argv[1]
local tokenText = argv[2]
local lastError = argv[3]
local delayText = argv[4]
local maxText = argv[5]

local row = redis.pcall('HMGET', jobKey, 'state', 'attempts')
if row[1] == 'active' and row[2] == tokenText and jobKey == string.sub(activeKey, 1, -7) .. 'job:' .. id then
  local delay = #delayText < 11 and string.find(delayText, '^%d+$') and tonumber(delayText)
  local maxAttempts = #maxText < 11 and string.find(maxText, '^%d+$') and tonumber(maxText)
  -- A token that is no number only matches an attempts written outside the scripts: the full checks refuse it.
  local token = tonumber(tokenText)
  if token and delay and delay <= 2147483647 and maxAttempts and maxAttempts >= 1 and maxAttempts <= 2147483647 then
    local scheduled = token < maxAttempts
    local target = scheduled and scheduleKey or deadKey
    local kind = rcall('TYPE', target)['ok']
    if kind == 'zset' or kind == 'none' then
      local removed = redis.pcall('ZREM', activeKey, id)
      if removed == 1 or removed == 0 then
        if scheduled then
          local t = rcall('TIME')
          rcall('ZADD', scheduleKey, t[1] * 1000 + math.floor(t[2] / 1000) + delay, id)
          rcall('HSET', jobKey, 'state', 'scheduled', 'last_error', lastError)
          return 'scheduled'
        end
        rcall('ZADD', deadKey, 0, id)
        rcall('HSET', jobKey, 'state', 'dead', 'last_error', lastError)
        return 'dead'
      end
    end
  end
end

--- @include "checkJobId"
--- @include "checkJobKey"
--- @include "intArg"
--- @include "checkFence"
--- @include "serverTimeMs"
--- @include "checkZsets"
local token, tokenErr = intArg(tokenText, 'token', 1, 9007199254740992)
local delay, delayErr = intArg(delayText, 'delay_ms', 0, 2147483647)
local maxAttempts, maxErr = intArg(maxText, 'max_attempts', 1, 2147483647)

local err = checkJobId(id) or checkJobKey(jobKey, id, activeKey, 'active') or tokenErr or delayErr or maxErr
if err then return err end
local refusal = checkFence(jobKey, id, token, tokenText)
  or checkZsets(token < maxAttempts and scheduleKey or deadKey)
if refusal then return refusal end

-- The first write through pcall: active of another type refuses it, and nothing is written.
local removed = redis.pcall('ZREM', activeKey, id)
if refused(removed) then return refusedReply(removed, activeKey) end
-- The fence made token the row's attempts.
if token < maxAttempts then
  rcall('ZADD', scheduleKey, serverTimeMs() + delay, id)
  rcall('HSET', jobKey, 'state', 'scheduled', 'last_error', lastError)
  return 'scheduled'
end
rcall('ZADD', deadKey, 0, id)
rcall('HSET', jobKey, 'state', 'dead', 'last_error', lastError)
return 'dead'
