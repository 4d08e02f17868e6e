--[[
  promote: move due retries (run-at <= now) from the schedule back to pending.
  One of the two pumps; the caller drives it on a cadence with its batch.
  Contract: docs/contract.md (keys, replies, errors, invariants).

  Input:
    KEYS[1] schedule set      emq:{q}:schedule (score = run-at, server ms)
    KEYS[2] pending set       emq:{q}:pending
    KEYS[3] dead set          emq:{q}:dead, where a damaged job is buried
    ARGV[1] job key prefix    emq:{q}:job:, the schedule set's base + 'job:'
    ARGV[2] limit             integer, 1 to 100000: at most this many move

  Reply:
    count moved (integer), damaged jobs included

  Damage: a due id whose row is missing or holds another type is buried in
  the dead set (buryDamaged, last_error 'damaged: ... at promote'); the rest
  moves. Damage inside a row (an attempts no script wrote) is met by claim.

  Errors:
    EMQARG     the call has not 3 KEYS and 2 ARGV, the job key prefix is not
               the schedule set's base + 'job:', or limit is not an integer
               in range; nothing moves
    EMQDAMAGE  the pending or dead set holds another type; nothing moves

  A due id whose row the server will not let it read (on a cluster, a row
  already moved to another node while the slot migrates) refuses the call
  with the server's error before anything moves. Whether the slot moves is
  asked at most once per call (rowInFlight), however many rows are missing.

  Cost is O(log N + k) for k due entries (dueIds, dropFirst).

  Cost: the arguments pass one test each, made inline (the counts of KEYS
  and ARGV, a pattern match of limit, a compare of the prefix against the
  schedule set's name), and a call with nothing due ends after TIME and
  one range read. Arguments these tests do not accept get the full checks,
  in the contract's order.
]]
local rcall = redis.call
-- KEYS and ARGV are named once each: the global lookups this saves pay for the test of
-- their counts. Every script spells the refusal inline in the same words (a test holds
-- them equal): a shared helper put a function in every script, and counted, that cost
-- even the verbs that never call it.
local keys, argv = KEYS, ARGV
if #keys ~= 3 or #argv ~= 2 then
  return redis.error_reply('EMQARG promote takes 3 keys and 2 arguments, got ' .. #keys .. ' and ' .. #argv)
end
local scheduleKey = keys[1]
local pendingKey = keys[2]
local deadKey = keys[3]
local jobPrefix = argv[1]
local limitText = argv[2]
-- unpack puts every row on Lua's C stack, which holds about 8000 values.
local ROWS_PER_EXISTS = 1000

local limit = #limitText < 7 and string.find(limitText, '^%d+$') and tonumber(limitText)
local due
if limit and limit >= 1 and limit <= 100000 and string.sub(scheduleKey, -8) == 'schedule'
    and jobPrefix == string.sub(scheduleKey, 1, -9) .. 'job:' then
  local t = rcall('TIME')
  due = redis.pcall('ZRANGE', scheduleKey, '-inf', t[1] * 1000 + math.floor(t[2] / 1000), 'BYSCORE', 'LIMIT', 0,
    limit)
  if not due[1] and not due['err'] then return 0 end
end

--- @include "checkJobPrefix"
--- @include "intArg"
--- @include "serverTimeMs"
--- @include "dueIds"
--- @include "zaddZero"
--- @include "checkZsets"
--- @include "buryDamaged"
--- @include "rowInFlight"
if not due then
  -- The tests above did not accept the arguments: the full checks answer.
  local limitErr
  limit, limitErr = intArg(limitText, 'limit', 1, 100000)
  local err = checkJobPrefix(jobPrefix, scheduleKey, 'schedule') or limitErr
  if err then return err end
  due = dueIds(scheduleKey, serverTimeMs(), limit)
end
if refused(due) then return refusedReply(due, scheduleKey) end
if #due == 0 then return 0 end
-- The sets it writes are checked only when it has something to move.
local err = checkZsets(pendingKey, deadKey)
if err then return err end
-- Every due row is read before the first write: one EXISTS per thousand
-- rows (a row per call would double promote's cost). A read the server
-- refuses (on a cluster, a row already moved to another node while the
-- slot migrates; an ACL without EXISTS) returns with nothing moved, where a
-- refusal after the schedule's drop would leave the due jobs in no set.
local found = 0
for first = 1, #due, ROWS_PER_EXISTS do
  local rows = {}
  for i = first, math.min(first + ROWS_PER_EXISTS - 1, #due) do rows[#rows + 1] = jobPrefix .. due[i] end
  local n = redis.pcall('EXISTS', unpack(rows))
  if refused(n) then return n end
  found = found + n
end
-- Some row is missing: which, and whether it may be on the other node of a moving slot.
local missing = {}
if found < #due then
  for i = 1, #due do
    if rcall('EXISTS', jobPrefix .. due[i]) == 0 then
      local moving = rowInFlight(jobPrefix .. due[i])
      if moving then return redis.error_reply(moving) end
      missing[i] = true
    end
  end
end
dropFirst(scheduleKey, #due)
-- The state write is the type's check: it is refused, having written
-- nothing, on a key of another type. A row it cannot tell from a whole
-- one (a spoiled attempts) is met by claim.
local back = {}
for i = 1, #due do
  if missing[i] then
    buryDamaged(jobPrefix, deadKey, due[i], 'row missing at promote')
  else
    -- HSET of one field answers 0 or 1; anything else is its refusal.
    local set = redis.pcall('HSET', jobPrefix .. due[i], 'state', 'pending')
    if set == 0 or set == 1 then
      back[#back + 1] = due[i]
    else
      buryDamaged(jobPrefix, deadKey, due[i], 'row is not a hash at promote')
    end
  end
end
zaddZero(pendingKey, back)
return #due
