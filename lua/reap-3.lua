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

  Errors:
    EMQARG  the job key prefix is not the active set's base + 'job:', or
            limit or max_attempts is not an integer in range; nothing moves

  Cost is O(log M + k) for an active set of M and k expired (takeDue).
  Promote and reap share the take and the move back to pending; only the
  split by attempts is reap's own, so promote reads no attempts it would not
  use.
]]
--- @include "checkJobPrefix"
--- @include "intArg"
--- @include "serverTimeMs"
--- @include "takeDue"
--- @include "backToPending"
--- @include "zaddZero"
local rcall = redis.call
local activeKey = KEYS[1]
local pendingKey = KEYS[2]
local deadKey = KEYS[3]
local jobPrefix = ARGV[1]
local limit, limitErr = intArg(ARGV[2], 'limit', 1, 100000)
local maxAttempts, maxErr = intArg(ARGV[3], 'max_attempts', 1, 2147483647)
local err = checkJobPrefix(jobPrefix, activeKey, 'active') or limitErr or maxErr
if err then return err end

local expired = takeDue(activeKey, serverTimeMs(), limit)
local back, dead = {}, {}
for i = 1, #expired do
  local jobKey = jobPrefix .. expired[i]
  if tonumber(rcall('HGET', jobKey, 'attempts')) >= maxAttempts then
    rcall('HSET', jobKey, 'state', 'dead', 'last_error', 'lease expired')
    dead[#dead + 1] = expired[i]
  else
    back[#back + 1] = expired[i]
  end
end
backToPending(jobPrefix, pendingKey, back)
if #dead > 0 then zaddZero(deadKey, dead) end
return #expired
