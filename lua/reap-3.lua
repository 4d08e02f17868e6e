--[[
  reap: return expired leases (deadline <= now) to pending. A job whose
  attempts already reached max_attempts goes to the dead set instead, with
  last_error "lease expired". One of the two pumps; the lease is the only
  crash detector, so no heartbeat exists to consult.
  Contract: docs/contract.md (keys, replies, errors, invariants).

  Input:
    KEYS[1] active set        emq:{q}:active (score = lease deadline, server ms)
    KEYS[2] pending set       emq:{q}:pending
    KEYS[3] dead set          emq:{q}:dead
    ARGV[1] job key prefix    emq:{q}:job:, the active set's base + 'job:'
    ARGV[2] limit             integer, 1 to 100000: the cap (product default 100)
    ARGV[3] max_attempts      integer, 1 to 2^31-1

  Reply:
    count reaped (integer), never more than limit

  Damage: an expired id whose row is missing, holds another type, is not in
  state active or lacks an attempts of plain digits up to 2^53 (readRow) is
  buried in the dead set
  (buryDamaged, last_error 'damaged: ... at reap'); the rest of the batch
  moves as usual, and the count includes it.

  Errors:
    EMQARG     the call has not 3 KEYS and 3 ARGV, the job key prefix is not
               the active set's base + 'job:', or limit or max_attempts is
               not an integer in range; nothing moves
    EMQDAMAGE  the pending or dead set holds another type; nothing moves

  Cost is O(log M + k) for an active set of M and k expired (dueIds, dropFirst).
  Promote and reap share the take and the move back to pending; only the
  split by attempts is reap's own, so promote reads no attempts it would not
  use.

  Cost: the arguments pass one test each, made inline (the counts of KEYS
  and ARGV, a pattern match of each integer, a compare of the prefix
  against the active set's name), and a call with nothing expired ends
  after TIME and one range read. Arguments these tests do not accept get
  the full checks, in the contract's order. Each expired row is judged
  inline (state active, attempts of fewer than 16 plain digits); readRow reads any
  other again and names its damage, asking whether the slot moves
  (rowInFlight) at most once per call.
]]
local rcall = redis.call
-- KEYS and ARGV are named once each: the global lookups this saves pay for the test of
-- their counts. Every script spells the refusal inline in the same words (a test holds
-- them equal): a shared helper put a function in every script, and counted, that cost
-- even the verbs that never call it.
local keys, argv = KEYS, ARGV
if #keys ~= 3 or #argv ~= 3 then
  return redis.error_reply('EMQARG reap takes 3 keys and 3 arguments, got ' .. #keys .. ' and ' .. #argv)
end
local activeKey = keys[1]
local pendingKey = keys[2]
local deadKey = keys[3]
local jobPrefix = argv[1]
local limitText = argv[2]
local maxText = argv[3]

local limit = #limitText < 7 and string.find(limitText, '^%d+$') and tonumber(limitText)
local maxAttempts = #maxText < 11 and string.find(maxText, '^%d+$') and tonumber(maxText)
local expired
if limit and limit >= 1 and limit <= 100000 and maxAttempts and maxAttempts >= 1 and maxAttempts <= 2147483647
    and string.sub(activeKey, -6) == 'active' and jobPrefix == string.sub(activeKey, 1, -7) .. 'job:' then
  local t = rcall('TIME')
  expired = redis.pcall('ZRANGE', activeKey, '-inf', t[1] * 1000 + math.floor(t[2] / 1000), 'BYSCORE', 'LIMIT', 0,
    limit)
  if not expired[1] and not expired['err'] then return 0 end
end

--- @include "checkJobPrefix"
--- @include "intArg"
--- @include "serverTimeMs"
--- @include "dueIds"
--- @include "backToPending"
--- @include "zaddZero"
--- @include "checkZsets"
--- @include "readRow"
--- @include "buryDamaged"
if not expired then
  -- The tests above did not accept the arguments: the full checks answer.
  local limitErr, maxErr
  limit, limitErr = intArg(limitText, 'limit', 1, 100000)
  maxAttempts, maxErr = intArg(maxText, 'max_attempts', 1, 2147483647)
  local err = checkJobPrefix(jobPrefix, activeKey, 'active') or limitErr or maxErr
  if err then return err end
  expired = dueIds(activeKey, serverTimeMs(), limit)
end
if refused(expired) then return refusedReply(expired, activeKey) end
if #expired == 0 then return 0 end
-- The sets it writes are checked only when it has something to move.
local err = checkZsets(pendingKey, deadKey)
if err then return err end
-- Every row is read before the first write, so a refused read moves nothing.
local found = {}
-- Looked up once for the loop, not once per row.
local rpcall, find = redis.pcall, string.find
for i = 1, #expired do
  -- A healthy row is judged inline; readRow reads again and says what is wrong with any other.
  local row = rpcall('HMGET', jobPrefix .. expired[i], 'state', 'attempts')
  -- Plain digits, fewer than 16 and so below 2^53, before the text is read as a number (by + 0,
  -- which costs no call): tonumber would take 'inf', '0x10' and '1e3'.
  local text = row[2]
  local attempts = row[1] == 'active' and text and #text < 16 and find(text, '^%d+$') and text + 0
  if not attempts then
    local why, denied
    attempts, why, denied = readRow(jobPrefix .. expired[i], 'active', false)
    if denied then return redis.error_reply(denied) end
    attempts = attempts or why
  end
  found[i] = attempts
end
dropFirst(activeKey, #expired)
local back, dead = {}, {}
for i = 1, #expired do
  local attempts = found[i]
  if type(attempts) == 'string' then
    buryDamaged(jobPrefix, deadKey, expired[i], attempts .. ' at reap')
  elseif attempts >= maxAttempts then
    rcall('HSET', jobPrefix .. expired[i], 'state', 'dead', 'last_error', 'lease expired')
    dead[#dead + 1] = expired[i]
  else
    back[#back + 1] = expired[i]
  end
end
backToPending(jobPrefix, pendingKey, back)
if #dead > 0 then zaddZero(deadKey, dead) end
return #expired
