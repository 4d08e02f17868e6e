--[[
  refused(reply): whether a reply from redis.pcall is an error.

  notZset(key, kind): the EMQDAMAGE error reply for a queue key that is not
  a sorted set (kind: what it is, when known).

  checkZsets(...): nil when every key given is a sorted set or absent; else
  notZset for the first that is not. A script checks the sets it writes
  after its first write: a key of another type (an operator's SET, a clash
  with another application) would fail that write after the first had run,
  and Lua does not roll back, so the call is refused before anything moves.
  A set a script reads before its first write (claim's pending, the pumps'
  source) is read through pcall instead, which costs nothing when it is
  right, and refused with notZset when it is not.
]]
local function refused(reply)
  -- pcall answers an error as a table with an err field; an integer reply has none.
  return type(reply) == 'table' and reply['err'] ~= nil
end

local function notZset(key, kind)
  return redis.error_reply('EMQDAMAGE ' .. key .. ' is ' .. (kind and ('a ' .. kind) or 'of another type')
    .. ', not a sorted set; nothing moved')
end

local function checkZsets(...)
  for i = 1, select('#', ...) do
    local key = select(i, ...)
    local kind = redis.call('TYPE', key)['ok']
    if kind ~= 'zset' and kind ~= 'none' then return notZset(key, kind) end
  end
  return nil
end
