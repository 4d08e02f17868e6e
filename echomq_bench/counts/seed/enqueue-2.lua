--[[
  A minimal enqueue, the reference the count gate sets the project's
  enqueue beside: the seed's contract (idempotent by id, a new row
  state=pending attempts=0 with its payload, the id in pending at score 0,
  an id of another kind refused with EMQKIND) and no other check.
  KEYS[1] pending, KEYS[2] the job row, ARGV[1] id, ARGV[2] payload.
]]
if string.sub(ARGV[1], 1, 3) ~= 'JOB' then
  return redis.error_reply('EMQKIND id kind ' .. string.sub(ARGV[1], 1, 3) .. ' is not JOB')
end
if redis.call('EXISTS', KEYS[2]) == 1 then return 'duplicate' end
redis.call('HSET', KEYS[2], 'state', 'pending', 'attempts', 0, 'payload', ARGV[2])
redis.call('ZADD', KEYS[1], 0, ARGV[1])
return 'enqueued'
