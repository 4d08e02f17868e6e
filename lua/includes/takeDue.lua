--[[
  takeDue(key, now, limit): remove and return the ids of key scored at or
  below now, lowest score first, at most limit of them. The due entries are
  the k lowest scores, so one range read finds them and one rank-range
  delete removes them: O(log N + k).
]]
local function takeDue(key, now, limit)
  local due = redis.call('ZRANGE', key, '-inf', now, 'BYSCORE', 'LIMIT', 0, limit)
  if #due > 0 then redis.call('ZREMRANGEBYRANK', key, 0, #due - 1) end
  return due
end
