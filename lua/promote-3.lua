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
--- @include "zaddZero"
--- @include "checkZsets"
--- @include "buryDamaged"
--- @include "rowInFlight"
local rcall = redis.call
local scheduleKey = KEYS[1]
local pendingKey = KEYS[2]
local deadKey = KEYS[3]
local jobPrefix = ARGV[1]
local limit, limitErr = intArg(ARGV[2], 'limit', 1, 100000)
-- unpack puts every row on Lua's C stack, which holds about 8000 values.
local ROWS_PER_EXISTS = 1000
local err = checkJobPrefix(jobPrefix, scheduleKey, 'schedule') or limitErr
if err then return err end

local due = dueIds(scheduleKey, serverTimeMs(), limit)
if refused(due) then return refusedReply(due, scheduleKey) end
if #due == 0 then return 0 end
-- The sets it writes are checked only when it has something to move.
err = checkZsets(pendingKey, deadKey)
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
  elseif refused(redis.pcall('HSET', jobPrefix .. due[i], 'state', 'pending')) then
    buryDamaged(jobPrefix, deadKey, due[i], 'row is not a hash at promote')
  else
    back[#back + 1] = due[i]
  end
end
zaddZero(pendingKey, back)
return #due
