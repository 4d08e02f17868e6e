--[[
  enqueue: add a new job in state pending, FIFO by id.
  Contract: docs/contract.md (keys, replies, errors, invariants).

  Input:
    KEYS[1] pending set       emq:{q}:pending
    KEYS[2] job row           emq:{q}:job:<id>
    ARGV[1] id                14 bytes: kind JOB + 11 base62 digits
    ARGV[2] payload           opaque bytes

  Reply:
    "enqueued"   a new row, state=pending attempts=0, id in pending at score 0
    "duplicate"  a row with that id exists already; it is left untouched

  Errors:
    EMQID    malformed id
    EMQKIND  the id's kind is not JOB
]]
--- @include "checkJobId"
local rcall = redis.call
local pendingKey = KEYS[1]
local jobKey = KEYS[2]
local id = ARGV[1]
local payload = ARGV[2]

local err = checkJobId(id)
if err then return err end

if rcall('EXISTS', jobKey) == 1 then
  return 'duplicate'
end
rcall('HSET', jobKey, 'state', 'pending', 'attempts', 0, 'payload', payload)
rcall('ZADD', pendingKey, 0, id)
return 'enqueued'
