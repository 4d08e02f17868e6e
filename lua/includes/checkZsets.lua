--[[
  refused(reply): whether a reply from redis.pcall is an error.

  notZset(key, kind): the EMQDAMAGE error reply for a queue key that is not
  a sorted set (kind: what it is, when known).

  refusedReply(reply, key): the reply for a refused first write or read on a
  queue set: notZset when the key held another type (WRONGTYPE), else the
  server's own refusal unchanged. A script's first write is the only one
  the server can refuse for memory (OOM under noeviction) or an ACL, and a
  refused first write has written nothing, so the caller returns it as is.

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

local function refusedReply(reply, key)
  if string.find(reply['err'], 'WRONGTYPE', 1, true) then return notZset(key) end
  return reply
end

local function checkZsets(...)
  for i = 1, select('#', ...) do
    local key = select(i, ...)
    local kind = redis.call('TYPE', key)['ok']
    if kind ~= 'zset' and kind ~= 'none' then return notZset(key, kind) end
  end
  return nil
end
