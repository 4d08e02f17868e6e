--[[
  serverTimeMs(): the server's clock in whole milliseconds, from TIME
  (seconds, microseconds). Every score the queue keeps on the clock (lease
  deadline, run-at) is in this unit, and only the server's clock is used, so
  clients with drifting clocks agree on what is due.
]]
local function serverTimeMs()
  local t = redis.call('TIME')
  return t[1] * 1000 + math.floor(t[2] / 1000)
end
