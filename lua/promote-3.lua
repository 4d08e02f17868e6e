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

  A due id whose row the server will not let it read (on a cluster, a row
  already moved to another node while the slot migrates) refuses the call
  with the server's error before anything moves.

  Cost is O(log N + k) for k due entries (dueIds, dropFirst).
]]
--- @include "checkJobPrefix"
--- @include "intArg"
--- @include "serverTimeMs"
--- @include "dueIds"
--- @include "backToPending"
--- @include "zaddZero"
--- @include "checkZsets"
--- @include "buryDamaged"
--- @include "rowInFlight"
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
-- Every row's type is read before the first write. A read the server
-- refuses (on a cluster, a row already moved to another node while the
-- slot migrates; an ACL without TYPE) then returns with nothing moved,
-- where a refusal after the schedule's drop would leave the due jobs in
-- no set.
local kinds = {}
for i = 1, #due do
  local kind = redis.pcall('TYPE', jobPrefix .. due[i])
  if refused(kind) then return kind end
  kinds[i] = kind['ok']
  if kinds[i] == 'none' then
    local moving = rowInFlight(jobPrefix .. due[i])
    if moving then return redis.error_reply(moving) end
  end
end
dropFirst(scheduleKey, #due)
-- A row it cannot tell from a whole one (a spoiled attempts) is met by claim.
local back = {}
for i = 1, #due do
  if kinds[i] == 'hash' then
    back[#back + 1] = due[i]
  elseif kinds[i] == 'none' then
    buryDamaged(jobPrefix, deadKey, due[i], 'row missing at promote')
  else
    buryDamaged(jobPrefix, deadKey, due[i], 'row is not a hash at promote')
  end
end
backToPending(jobPrefix, pendingKey, back)
return #due
