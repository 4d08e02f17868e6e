--[[
  claim: hand out the oldest pending job under a lease on the server's clock.
  Contract: docs/contract.md (keys, replies, errors, invariants).

  Input:
    KEYS[1] pending set       emq:{q}:pending
    KEYS[2] active set        emq:{q}:active (score = lease deadline, server ms)
    ARGV[1] job key prefix    emq:{q}:job:, the pending set's base + 'job:'
    ARGV[2] lease_ms          integer, 1 to 2^31-1

  Reply:
    {id, payload, token}  token is the job's attempts after this claim
    {}                    pending is empty

  Errors:
    EMQARG  the job key prefix is not the pending set's base + 'job:', or
            lease_ms is not an integer in range; nothing is popped

  The job key is built from the prefix because the id is unknown until it is
  popped; the prefix carries the queue's hash tag, so the row lives in the
  same cluster slot as the declared keys. The script checks that it is the
  queue's own before the pop: a row write refused after it would lose the job.
]]
--- @include "checkJobPrefix"
--- @include "intArg"
--- @include "serverTimeMs"
local rcall = redis.call
local pendingKey = KEYS[1]
local activeKey = KEYS[2]
local jobPrefix = ARGV[1]
local lease, leaseErr = intArg(ARGV[2], 'lease_ms', 1, 2147483647)
local err = checkJobPrefix(jobPrefix, pendingKey, 'pending') or leaseErr
if err then return err end

local popped = rcall('ZPOPMIN', pendingKey)
if #popped == 0 then return {} end
local id = popped[1]
local jobKey = jobPrefix .. id
-- One read and one write instead of HINCRBY, HSET and HGET: the script is
-- atomic, so reading attempts and writing it back bumped is the same
-- increment, one server call cheaper on every claim.
local row = rcall('HMGET', jobKey, 'attempts', 'payload')
local token = (tonumber(row[1]) or 0) + 1
rcall('HSET', jobKey, 'state', 'active', 'attempts', token)
rcall('ZADD', activeKey, serverTimeMs() + lease, id)
return {id, row[2], token}
