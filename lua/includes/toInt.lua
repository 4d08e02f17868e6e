--[[
  toInt(s, lo, hi): the integer s spells when it is plain decimal digits
  within lo..hi, else nil. Doubles hold integers exactly up to 2^53, the
  largest bound any verb takes.
]]
local function toInt(s, lo, hi)
  if #s > 16 or not string.find(s, '^%d+$') then return nil end
  local n = tonumber(s)
  if n < lo or n > hi then return nil end
  return n
end
