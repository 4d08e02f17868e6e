--[[
  complete: retire a job; only the current lease holder may.
  Contract: docs/contract.md (keys, replies, errors, invariants).

  Input:
    KEYS[1] active set        emq:{q}:active
    KEYS[2] job row           emq:{q}:job:<id>
    ARGV[1] id                14-byte JOB id
    ARGV[2] token             integer, 1 to 2^53: the attempts value claim returned

  Reply:
    "ok"   the row is deleted and the id leaves active: nothing remains

  Errors:
    EMQID     malformed id
    EMQKIND   the id's kind is not JOB
    EMQARG    the call has not 2 KEYS and 2 ARGV, the job row is not the row
              of id beside the active set, or token is not an integer in
              range
    EMQSTALE   the job is not active, or its attempts moved past this token
    EMQDAMAGE  the row's key holds another type, or the active set another
               type than a sorted set; nothing moves

  Cost: a healthy call is one HMGET, one ZREM and one DEL, after the
  counts of KEYS and ARGV. It is accepted at once when the row is active
  at exactly the token text sent and is the row of id beside the active
  set: only claim writes state active, and only after checkJobId passed
  the id and with an attempts of plain digits, so the id and token checks
  below could not refuse such a call. Any other call, or
  a ZREM the server refuses (which has written nothing), runs the full
  checks from the start, in the contract's order.
]]
-- KEYS and ARGV are named once each: the global lookups this saves pay for the test of
-- their counts. Every script spells the refusal inline in the same words (a test holds
-- them equal): a shared helper put a function in every script, and counted, that cost
-- even the verbs that never call it.
local keys, argv = KEYS, ARGV
if #keys ~= 2 or #argv ~= 2 then
  return redis.error_reply('EMQARG complete takes 2 keys and 2 arguments, got ' .. #keys .. ' and ' .. #argv)
end
local activeKey = keys[1]
local jobKey = keys[2]
local id = argv[1]
local tokenText = argv[2]

local row = redis.pcall('HMGET', jobKey, 'state', 'attempts')
if row[1] == 'active' and row[2] == tokenText and jobKey == string.sub(activeKey, 1, -7) .. 'job:' .. id then
  local removed = redis.pcall('ZREM', activeKey, id)
  if removed == 1 or removed == 0 then
    redis.call('DEL', jobKey)
    return 'ok'
  end
end

--- @include "checkJobId"
--- @include "checkJobKey"
--- @include "intArg"
--- @include "checkFence"
--- @include "checkZsets"
local token, tokenErr = intArg(tokenText, 'token', 1, 9007199254740992)
local err = checkJobId(id) or checkJobKey(jobKey, id, activeKey, 'active') or tokenErr
if err then return err end
local stale = checkFence(jobKey, id, token, tokenText)
if stale then return stale end

-- The set first: a refused ZREM (active of another type) has written nothing,
-- and the DEL after it cannot be refused for a type.
local removed = redis.pcall('ZREM', activeKey, id)
if refused(removed) then return refusedReply(removed, activeKey) end
redis.call('DEL', jobKey)
return 'ok'
