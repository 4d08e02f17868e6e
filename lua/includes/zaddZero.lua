--[[
  zaddZero(key, ids): ZADD every id at score 0, in slices small enough for
  unpack(), whose stack limit is a few thousand values.
]]
local function zaddZero(key, ids)
  local args = {}
  for i = 1, #ids do
    args[#args + 1] = 0
    args[#args + 1] = ids[i]
    if #args >= 1000 or i == #ids then
      redis.call('ZADD', key, unpack(args))
      args = {}
    end
  end
end
