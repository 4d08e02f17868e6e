--[[
  intArg(s, name, lo, hi): the integer s spells when it is plain decimal
  digits within lo..hi; else nil and the EMQARG error reply naming the
  argument and its range. The one place that message is spelled, so every
  verb refuses an argument in the same words. Doubles hold integers exactly
  up to 2^53, the largest bound any verb takes; above it tonumber rounds
  ('9007199254740993' reads as 2^53), so a 16-digit s is first compared as
  text, which for digit strings of one length is numeric order. The parse
  is inline, not a separate helper: every call of every verb runs it, and
  a second function would cost a closure and a call each time.
]]
local function intArg(s, name, lo, hi)
  local len = #s
  if (len < 16 or len == 16 and s <= '9007199254740992') and string.find(s, '^%d+$') then
    local n = tonumber(s)
    if n >= lo and n <= hi then return n end
  end
  -- 2^53 in decimal would read as a double's '9.007199254741e+15'.
  local top = hi == 9007199254740992 and '2^53' or string.format('%d', hi)
  return nil, redis.error_reply('EMQARG ' .. name .. ' must be an integer from ' .. lo .. ' to ' .. top)
end
