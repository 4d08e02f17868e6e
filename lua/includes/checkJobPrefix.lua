--[[
  checkJobPrefix(jobPrefix, key, keyType): nil when jobPrefix is the row
  prefix of the queue that key belongs to, else the EMQARG error reply.
  The queue's keys share one base, emq:{q}:, so key is <base><keyType> and
  the rows are <base>job:; a prefix is accepted only when it is that exact
  string. Without the check a caller could name rows outside the queue's
  hash tag: under an ACL limited to the queue's keys the first row write is
  refused after the pop has run, and Lua does not roll back, so the popped
  job would vanish. Every verb that takes a prefix checks it before its
  first write.

  The check runs on every call, so it allocates nothing when the prefix is
  right. Slicing key down to its base (string.sub) would make a new string
  each time. Instead gsub swaps the prefix's trailing 'job:' for keyType.
  Lua 5.1 interns every string, so a result that equals key is found in the
  string table and not allocated again. A wrong prefix pays for its
  new string, but only on the way to the error.
]]
local function checkJobPrefix(jobPrefix, key, keyType)
  local asKey, swapped = string.gsub(jobPrefix, 'job:$', keyType, 1)
  if swapped == 1 and asKey == key then return nil end
  local base = #key - #keyType
  if base >= 0 and string.sub(key, base + 1) == keyType then
    return redis.error_reply('EMQARG job key prefix must be ' .. string.sub(key, 1, base) .. 'job:, the rows of '
      .. key)
  end
  return redis.error_reply('EMQARG job key prefix has no queue to belong to: ' .. key .. ' does not end in '
    .. keyType)
end
