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
    EMQID      malformed id
    EMQKIND    the id's kind is not JOB
    EMQARG     the call has not 2 KEYS and 2 ARGV, or the job row is not the
               row of id beside the pending set
    EMQDAMAGE  the row's key holds another type than a hash, or the pending
               set another type than a sorted set; nothing is written

  Cost: a healthy call is one HLEN, then one ZADD and one HSET or the
  answer duplicate, after the counts of KEYS and ARGV, one length test and
  one pattern match of the id (JOB_ID_SHAPE) and one compare of the row's
  key. Any other call (an id the pattern leaves to checkJobId, a refusal)
  runs the full checks from the start, in the contract's order: the
  healthy path has written nothing when it gives way.
]]
--- @include "jobIdShape"
-- KEYS and ARGV are named once each: the global lookups this saves pay for the test of
-- their counts. Every script spells the refusal inline in the same words (a test holds
-- them equal): a shared helper put a function in every script, and counted, that cost
-- even the verbs that never call it.
local keys, argv = KEYS, ARGV
if #keys ~= 2 or #argv ~= 2 then
  return redis.error_reply('EMQARG enqueue takes 2 keys and 2 arguments, got ' .. #keys .. ' and ' .. #argv)
end
local pendingKey = keys[1]
local jobKey = keys[2]
local id = argv[1]
local payload = argv[2]

if #id == 14 and string.find(id, JOB_ID_SHAPE) and jobKey == string.sub(pendingKey, 1, -8) .. 'job:' .. id then
  local fields = redis.pcall('HLEN', jobKey)
  if fields == 0 then
    -- The set first: pending of another type refuses the ZADD, which has then written nothing.
    local added = redis.pcall('ZADD', pendingKey, 0, id)
    if added == 1 or added == 0 then
      redis.call('HSET', jobKey, 'state', 'pending', 'attempts', 0, 'payload', payload)
      return 'enqueued'
    end
  elseif type(fields) == 'number' then
    return 'duplicate'
  end
end

--- @include "checkJobId"
--- @include "checkJobKey"
--- @include "checkZsets"
local err = checkJobId(id) or checkJobKey(jobKey, id, pendingKey, 'pending')
if err then return err end

-- HLEN, not EXISTS: a key of another type under the row's name is damage,
-- not a job that is already there, and HLEN refuses it where EXISTS would
-- count it (an integer reply, so no dearer than EXISTS).
local fields = redis.pcall('HLEN', jobKey)
if refused(fields) then
  if not string.find(fields['err'], 'WRONGTYPE', 1, true) then return fields end
  return redis.error_reply('EMQDAMAGE ' .. jobKey .. ' is not a hash; nothing written')
end
if fields > 0 then return 'duplicate' end
local added = redis.pcall('ZADD', pendingKey, 0, id)
if refused(added) then return refusedReply(added, pendingKey) end
redis.call('HSET', jobKey, 'state', 'pending', 'attempts', 0, 'payload', payload)
return 'enqueued'
