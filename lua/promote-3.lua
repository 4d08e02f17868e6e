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

  Damage: a due id whose row is missing, holds another type, is not in
  state scheduled or lacks a whole attempts is buried in the dead set
  (buryDamaged, last_error 'damaged: ... at promote'); the rest moves.

  Errors:
    EMQARG     the job key prefix is not the schedule set's base + 'job:', or
               limit is not an integer in range; nothing moves
    EMQDAMAGE  the pending or dead set holds another type; nothing moves

  Cost is O(log N + k) for k due entries (dueIds, dropFirst), and one row read per
  entry, which the damage check needs.
]]
--- @include "checkJobPrefix"
--- @include "intArg"
--- @include "serverTimeMs"
--- @include "dueIds"
--- @include "backToPending"
--- @include "checkZsets"
--- @include "readRow"
--- @include "buryDamaged"
local rcall = redis.call
local scheduleKey = KEYS[1]
local pendingKey = KEYS[2]
local deadKey = KEYS[3]
local jobPrefix = ARGV[1]
local limit, limitErr = intArg(ARGV[2], 'limit', 1, 100000)
local err = checkJobPrefix(jobPrefix, scheduleKey, 'schedule') or limitErr or checkZsets(pendingKey, deadKey)
if err then return err end

local due = dueIds(scheduleKey, serverTimeMs(), limit)
if due['err'] then return notZset(scheduleKey) end
-- Every row is read before the first write, so a refused read moves nothing.
local why = {}
for i = 1, #due do
  local attempts, damage, refused = readRow(jobPrefix .. due[i], 'scheduled', false)
  if refused then return redis.error_reply(refused) end
  why[i] = not attempts and damage or false
end
dropFirst(scheduleKey, #due)
local back = {}
for i = 1, #due do
  if why[i] then
    buryDamaged(jobPrefix, deadKey, due[i], why[i] .. ' at promote')
  else
    back[#back + 1] = due[i]
  end
end
backToPending(jobPrefix, pendingKey, back)
return #due
