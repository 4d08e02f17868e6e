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
    EMQARG     the job key prefix is not the schedule set's base + 'job:', or
               limit is not an integer in range; nothing moves
    EMQDAMAGE  the pending or dead set holds another type; nothing moves

  Cost is O(log N + k) for k due entries (dueIds, dropFirst).
]]
--- @include "checkJobPrefix"
--- @include "intArg"
--- @include "serverTimeMs"
--- @include "dueIds"
--- @include "zaddZero"
--- @include "checkZsets"
--- @include "buryDamaged"
local rcall = redis.call
local scheduleKey = KEYS[1]
local pendingKey = KEYS[2]
local deadKey = KEYS[3]
local jobPrefix = ARGV[1]
local limit, limitErr = intArg(ARGV[2], 'limit', 1, 100000)
local err = checkJobPrefix(jobPrefix, scheduleKey, 'schedule') or limitErr
if err then return err end

local due = dueIds(scheduleKey, serverTimeMs(), limit)
if refused(due) then return refusedReply(due, scheduleKey) end
if #due == 0 then return 0 end
-- The sets it writes are checked only when it has something to move.
err = checkZsets(pendingKey, deadKey)
if err then return err end
dropFirst(scheduleKey, #due)
-- The state write is the row's check: it fails on a key of another type,
-- and it adds a field (returns 1) only where the row was missing. A row it
-- cannot tell from a whole one (a spoiled attempts) is met by claim.
local back = {}
for i = 1, #due do
  local written = redis.pcall('HSET', jobPrefix .. due[i], 'state', 'pending')
  if refused(written) then
    buryDamaged(jobPrefix, deadKey, due[i], 'row is not a hash at promote')
  elseif written == 1 then
    buryDamaged(jobPrefix, deadKey, due[i], 'row missing at promote')
  else
    back[#back + 1] = due[i]
  end
end
zaddZero(pendingKey, back)
return #due
