--[[
  checkJobKey(jobKey, id, key, keyType): nil when jobKey is the row of id
  beside key, i.e. <base>job:<id> where key is <base><keyType>; else the
  EMQARG error reply. The verbs that take a row in KEYS (enqueue, complete,
  retry) take its id in ARGV as well, for the set they move it in. Without
  the check a raw caller could fence and delete one job's row while the id
  it removes from a set is another's, which then sits in no set with no
  row, or in a set with none. The caller has checked id with checkJobId.

  The row is rebuilt from key and id and compared: the concatenation
  equals jobKey, which Lua has interned, so it allocates nothing, and only
  the base costs a new string. A gsub of the row's 'job:' and 14 digits
  with a find of id at its end allocates nothing at all, and still counts
  several times the instructions: Lua parses a pattern's class again for
  every byte it matches.
]]
local function checkJobKey(jobKey, id, key, keyType)
  local base = string.sub(key, 1, #key - #keyType)
  if jobKey == base .. 'job:' .. id then return nil end
  return redis.error_reply('EMQARG job row must be ' .. base .. 'job:' .. id .. ', the row of ' .. id
    .. ' beside ' .. key)
end
