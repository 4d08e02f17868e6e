--[[
  promote: move due retries (run-at <= now) from the schedule back to pending.
  One of the two pumps; the caller drives it on a cadence with its batch.
  Contract: docs/contract.md (keys, replies, errors, invariants).

  Input:
    KEYS[1] schedule set      emq:{q}:schedule (score = run-at, server ms)
    KEYS[2] pending set       emq:{q}:pending
    ARGV[1] job key prefix    emq:{q}:job:, the schedule set's base + 'job:'
    ARGV[2] limit             integer, 1 to 100000: at most this many move

  Reply:
    count moved (integer)

  Errors:
    EMQARG  the job key prefix is not the schedule set's base + 'job:', or
            limit is not an integer in range; nothing moves

  Cost is O(log N + k) for k due entries (takeDue).
]]
--- @include "checkJobPrefix"
--- @include "intArg"
--- @include "serverTimeMs"
--- @include "takeDue"
--- @include "backToPending"
local rcall = redis.call
local scheduleKey = KEYS[1]
local pendingKey = KEYS[2]
local jobPrefix = ARGV[1]
local limit, limitErr = intArg(ARGV[2], 'limit', 1, 100000)
local err = checkJobPrefix(jobPrefix, scheduleKey, 'schedule') or limitErr
if err then return err end

local due = takeDue(scheduleKey, serverTimeMs(), limit)
backToPending(jobPrefix, pendingKey, due)
return #due
