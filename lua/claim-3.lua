--[[
  claim: hand out the oldest pending job under a lease on the server's clock.
  Contract: docs/contract.md (keys, replies, errors, invariants).

  Input:
    KEYS[1] pending set       emq:{q}:pending
    KEYS[2] active set        emq:{q}:active (score = lease deadline, server ms)
    KEYS[3] dead set          emq:{q}:dead, where a damaged job is buried
    ARGV[1] job key prefix    emq:{q}:job:, the pending set's base + 'job:'
    ARGV[2] lease_ms          integer, 1 to 2^31-1

  Reply:
    {id, payload, token}  token is the job's attempts after this claim
    {}                    pending is empty (of jobs whose rows can be read)

  Damage: a popped member that is not a JOB id (any ZADD can put one in
  pending, and no complete or retry would accept it), or whose row is
  missing, holds another type, is not in state pending, or lacks a whole
  attempts or a payload, is buried in the dead set (buryDamaged, last_error
  'damaged: ... at claim') and the next id is popped, up to DAMAGE_SCAN of
  them per call; it is never handed out.

  Errors:
    EMQARG     the job key prefix is not the pending set's base + 'job:', or
               lease_ms is not an integer in range; nothing is popped
    EMQDAMAGE  the active or dead set holds another type; nothing is popped
    (server)   the server refused the read of the popped id's row (an ACL
               without HMGET; on a cluster, "non local key": the row has
               already moved to another node while the slot migrates). The
               id goes back where it was, at score 0, before the reply: the
               keyspace is as it was. The pop comes first because the id is
               unknown until then; peeking first would cost every claim a
               call that only this case needs.

  The job key is built from the prefix because the id is unknown until it is
  popped; the prefix carries the queue's hash tag, so the row lives in the
  same cluster slot as the declared keys. The script checks that it is the
  queue's own before the pop: a row write refused after it would lose the job.
]]
--- @include "checkJobId"
--- @include "checkJobPrefix"
--- @include "intArg"
--- @include "serverTimeMs"
--- @include "checkZsets"
--- @include "readRow"
--- @include "buryDamaged"
local rcall = redis.call
local pendingKey = KEYS[1]
local activeKey = KEYS[2]
local deadKey = KEYS[3]
local jobPrefix = ARGV[1]
local lease, leaseErr = intArg(ARGV[2], 'lease_ms', 1, 2147483647)
-- Damaged ids one call buries before it gives up with {}: a bound on how
-- long a keyspace full of damage can hold the server in one script.
local DAMAGE_SCAN = 100
local err = checkJobPrefix(jobPrefix, pendingKey, 'pending') or leaseErr or checkZsets(activeKey)
if err then return err end
local deadChecked = false

for _ = 1, DAMAGE_SCAN do
  local popped = redis.pcall('ZPOPMIN', pendingKey)
  if refused(popped) then return refusedReply(popped, pendingKey) end
  if #popped == 0 then return {} end
  local id = popped[1]
  local jobKey = jobPrefix .. id
  -- One read and one write instead of HINCRBY, HSET and HGET: the script is
  -- atomic, so reading attempts and writing it back bumped is the same
  -- increment, one server call cheaper on every claim.
  -- The row is read even for a member that is not a JOB id, since burying
  -- it writes there: a read the server refuses must come before any write.
  local attempts, payload, denied = readRow(jobKey, 'pending', true)
  if denied then
    -- Not damage: the server would not let this call read the row (an ACL
    -- without HMGET; on a cluster, a row already moved to another node
    -- while the slot migrates). Put the id back where ZPOPMIN found it
    -- (score 0, so the same place): the keyspace is as it was, and the
    -- server's refusal is the reply.
    rcall('ZADD', pendingKey, 0, id)
    return redis.error_reply(denied)
  end
  if checkJobId(id) then
    attempts, payload = nil, 'member is not a JOB id'  -- what is wrong, as readRow would say it
  end
  if attempts then
    local token = attempts + 1
    rcall('HSET', jobKey, 'state', 'active', 'attempts', token)
    rcall('ZADD', activeKey, serverTimeMs() + lease, id)
    return {id, payload, token}
  end
  -- The dead set is checked only when a job must go there, which damage
  -- makes rare; a dead set of another type puts the popped id back.
  if not deadChecked then
    local refusal = checkZsets(deadKey)
    if refusal then
      rcall('ZADD', pendingKey, 0, id)
      return refusal
    end
    deadChecked = true
  end
  buryDamaged(jobPrefix, deadKey, id, payload .. ' at claim')
end
return {}
