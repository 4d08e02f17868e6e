-- A minimal fenced complete: the least a complete can do and still be fenced
-- by the token. KEYS[1] active, KEYS[2] job row; ARGV[1] id, ARGV[2] token.
if tonumber(redis.call('HGET', KEYS[2], 'attempts')) ~= tonumber(ARGV[2]) then
  return redis.error_reply('EMQSTALE')
end
redis.call('DEL', KEYS[2])
redis.call('ZREM', KEYS[1], ARGV[1])
return 'ok'
