--[[
  checkFence(jobKey, id, token, tokenText): nil when the row is active and
  its attempts equal token, i.e. the caller holds the current lease; else
  the EMQSTALE error reply (tokenText is the token as the caller sent it).
  One HMGET reads both fields: the state alone would let a zombie from an
  earlier attempt through, the attempts alone would accept a token for a job
  already given back by retry.
]]
local function checkFence(jobKey, id, token, tokenText)
  local row = redis.call('HMGET', jobKey, 'state', 'attempts')
  if row[1] == 'active' and tonumber(row[2]) == token then return nil end
  return redis.error_reply('EMQSTALE token ' .. tokenText .. ' does not hold the lease on ' .. id)
end
