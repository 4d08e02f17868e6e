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
    n (integer)           no job handed out: the call buried n = DAMAGE_SCAN
                          damaged ids and stopped; more may wait, so call again

  Damage: a popped member that is not a JOB id (any ZADD can put one in
  pending, and no complete or retry would accept it), or whose row is
  missing, holds another type, is not in state pending, or lacks an
  attempts of plain digits below 2^53 (readRow) or a payload, is buried in
  the dead set (buryDamaged, last_error 'damaged: ... at claim') and the
  next id is popped, up to DAMAGE_SCAN of them per call; it is never handed
  out. A call that buried DAMAGE_SCAN and found no job says so with the
  count, not {}: the caller must not take it for an empty queue.

  Errors:
    EMQARG     the call has not 3 KEYS and 2 ARGV, the job key prefix is not
               the pending set's base + 'job:', or lease_ms is not an
               integer in range; nothing is popped
    EMQDAMAGE  the active set holds another type, or the dead set does
               (checked only when there is a job to bury); the popped id
               goes back where it was: nothing moves
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

  Cost: a healthy call is one ZPOPMIN, one HMGET, TIME, one ZADD and one
  HSET. Its checks are one test each, made inline: the counts of KEYS and
  ARGV, the arguments (a pattern match of lease_ms, a compare of the prefix
  against the pending set's name), the row (state pending; attempts '0',
  else fewer than 16 plain digits; a payload) and the id (its length and
  JOB_ID_SHAPE). The active set's type is checked by the lease's ZADD
  itself, through pcall, before the row is written
  (and by TYPE when pending is empty, where no ZADD runs). Any call these
  tests do not accept runs the full checks below them from the start, in
  the contract's order; the id popped on the way goes back at the score it
  had, so they find the keyspace as the call did.
]]
--- @include "jobIdShape"
local rcall = redis.call
-- KEYS and ARGV are named once each: the global lookups this saves pay for the test of
-- their counts. Every script spells the refusal inline in the same words (a test holds
-- them equal): a shared helper put a function in every script, and counted, that cost
-- even the verbs that never call it.
local keys, argv = KEYS, ARGV
if #keys ~= 3 or #argv ~= 2 then
  return redis.error_reply('EMQARG claim takes 3 keys and 2 arguments, got ' .. #keys .. ' and ' .. #argv)
end
local pendingKey = keys[1]
local activeKey = keys[2]
local deadKey = keys[3]
local jobPrefix = argv[1]
local leaseText = argv[2]
-- Damaged ids one call buries before it gives up, answering their count: a
-- bound on how long a keyspace full of damage can hold the server in one script.
local DAMAGE_SCAN = 100
-- The server's clock, read at most once per call.
local now

local lease = #leaseText < 11 and string.find(leaseText, '^%d+$') and tonumber(leaseText)
if lease and lease >= 1 and lease <= 2147483647 and string.sub(pendingKey, -7) == 'pending'
    and jobPrefix == string.sub(pendingKey, 1, -8) .. 'job:' then
  local popped = redis.pcall('ZPOPMIN', pendingKey)
  local id = popped[1]
  if not id and not popped['err'] then
    -- Nothing to lease, but an active set of another type still refuses the call.
    local kind = rcall('TYPE', activeKey)['ok']
    if kind == 'zset' or kind == 'none' then return {} end
  end
  if id then
    -- One read and one write instead of HINCRBY, HSET and HGET: the script
    -- is atomic, so reading attempts and writing it back bumped is the same
    -- increment, one server call cheaper on every claim.
    local jobKey = jobPrefix .. id
    local row = redis.pcall('HMGET', jobKey, 'state', 'attempts', 'payload')
    -- A job's first claim, the common one, reads its attempts without parsing it. Any
    -- other must be plain digits, fewer than 16 and so below 2^53 (readRow judges the
    -- rest), before it is read as a number: tonumber would take 'inf', '0x10' and '1e3'.
    local text = row[2]
    local attempts = text == '0' and 0 or text and #text < 16 and string.find(text, '^%d+$') and text + 0
    if row[1] == 'pending' and row[3] and attempts and #id == 14 and string.find(id, JOB_ID_SHAPE) then
      local t = rcall('TIME')
      now = t[1] * 1000 + math.floor(t[2] / 1000)
      local added = redis.pcall('ZADD', activeKey, now + lease, id)
      if added == 1 or added == 0 then
        rcall('HSET', jobKey, 'state', 'active', 'attempts', attempts + 1)
        return {id, row[3], attempts + 1}
      end
    end
    rcall('ZADD', pendingKey, popped[2], id)
  end
end

--- @include "checkJobId"
--- @include "checkJobPrefix"
--- @include "intArg"
--- @include "serverTimeMs"
--- @include "checkZsets"
--- @include "readRow"
--- @include "buryDamaged"
local leaseErr
lease, leaseErr = intArg(leaseText, 'lease_ms', 1, 2147483647)
local err = checkJobPrefix(jobPrefix, pendingKey, 'pending') or leaseErr or checkZsets(activeKey)
if err then return err end
local deadChecked = false

for _ = 1, DAMAGE_SCAN do
  local popped = redis.pcall('ZPOPMIN', pendingKey)
  if refused(popped) then return refusedReply(popped, pendingKey) end
  if #popped == 0 then return {} end
  local id = popped[1]
  local jobKey = jobPrefix .. id
  -- The row is read even for a member that is not a JOB id, since burying
  -- it writes there: a read the server refuses must come before any write.
  local attempts, payload, denied = readRow(jobKey, 'pending', true)
  if denied then
    -- Not damage: the server would not let this call read the row (an ACL
    -- without HMGET; on a cluster, a row already moved to another node
    -- while the slot migrates). Put the id back where ZPOPMIN found it:
    -- the keyspace is as it was, and the server's refusal is the reply.
    rcall('ZADD', pendingKey, popped[2], id)
    return redis.error_reply(denied)
  end
  if checkJobId(id) then
    attempts, payload = nil, 'member is not a JOB id'  -- what is wrong, as readRow would say it
  end
  if attempts then
    local token = attempts + 1
    rcall('HSET', jobKey, 'state', 'active', 'attempts', token)
    rcall('ZADD', activeKey, (now or serverTimeMs()) + lease, id)
    return {id, payload, token}
  end
  -- The dead set is checked only when a job must go there, which damage
  -- makes rare; a dead set of another type puts the popped id back.
  if not deadChecked then
    local refusal = checkZsets(deadKey)
    if refusal then
      rcall('ZADD', pendingKey, popped[2], id)
      return refusal
    end
    deadChecked = true
  end
  buryDamaged(jobPrefix, deadKey, id, payload .. ' at claim')
end
-- Every turn buried one: not {}, which would tell the caller that pending is empty.
return DAMAGE_SCAN
