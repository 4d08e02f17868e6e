--[[
  checkJobKey(jobKey, id, key, keyType): nil when jobKey is the row of id in
  the queue that key belongs to, i.e. <base>job:<id> where key is
  <base><keyType>; else the EMQARG error reply. The verbs that take a row in
  KEYS (enqueue, complete, retry) take its id in ARGV as well, for the set
  they move it in. Without the check a raw caller could fence and delete
  one job's row while the id it removes from a set is another's, which
  then sits in no set with no row, or in a set with none. The caller has
  checked id with checkJobId. The expected key is built once, and Lua
  interns it, so the compare with jobKey is one pointer test.
]]
local function checkJobKey(jobKey, id, key, keyType)
  local base = #key - #keyType
  local prefix = string.sub(key, 1, base)
  if string.sub(key, base + 1) == keyType and jobKey == prefix .. 'job:' .. id then
    return nil
  end
  return redis.error_reply('EMQARG job row must be ' .. prefix .. 'job:' .. id .. ', the row of ' .. id
    .. ' beside ' .. key)
end
