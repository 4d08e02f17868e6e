--[[
  dueIds(key, now, limit): the ids of key scored at or below now, lowest
  score first, at most limit of them; dropFirst(key, n) then removes those n,
  which are the n lowest scores: one range read and one rank-range delete,
  O(log N + k). Apart, so that a pump can read the rows of what is due
  before its first write. The read goes through pcall: a key of another
  type comes back as an error table for the caller to refuse with notZset.
]]
local function dueIds(key, now, limit)
  return redis.pcall('ZRANGE', key, '-inf', now, 'BYSCORE', 'LIMIT', 0, limit)
end

local function dropFirst(key, n)
  if n > 0 then redis.call('ZREMRANGEBYRANK', key, 0, n - 1) end
end
