--[[
  The seed's claim, verbatim: the script the state machine of
  docs/contract.md grew from, before any of its checks, and the reference
  the count gate sets the project's claim beside. It reads
  KEYS[1] pending, KEYS[2] active, ARGV[1] the job key prefix and
  ARGV[2] lease_ms; the project's third key (dead) is passed and unused.
  It checks nothing: a count of it is the price of the state machine alone.
]]
local popped = redis.call('ZPOPMIN', KEYS[1])
if #popped == 0 then return {} end
local id = popped[1]
local jk = ARGV[1] .. id
local att = redis.call('HINCRBY', jk, 'attempts', 1)
redis.call('HSET', jk, 'state', 'active')
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), id)
return {id, redis.call('HGET', jk, 'payload'), att}
