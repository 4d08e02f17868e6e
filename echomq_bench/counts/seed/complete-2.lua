--[[
  A minimal fenced complete, the reference the count gate sets the
  project's complete beside: the seed's contract (only the holder of the
  current token retires the row; a stale token answers EMQSTALE) and no
  other check. KEYS[1] active, KEYS[2] the job row, ARGV[1] id, ARGV[2] token.
]]
local row = redis.call('HMGET', KEYS[2], 'state', 'attempts')
if row[1] ~= 'active' or row[2] ~= ARGV[2] then
  return redis.error_reply('EMQSTALE token ' .. ARGV[2] .. ' does not hold the lease on ' .. ARGV[1])
end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('DEL', KEYS[2])
return 'ok'
