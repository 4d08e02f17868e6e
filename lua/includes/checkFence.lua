--[[
  checkFence(jobKey, id, token, tokenText): nil when the row is active and
  its attempts equal token, i.e. the caller holds the current lease; else
  the EMQSTALE error reply (tokenText is the token as the caller sent it),
  or EMQDAMAGE when the row's key holds another type. One HMGET reads both
  fields: the state alone would let a zombie from an earlier attempt
  through, the attempts alone would accept a token for a job already given
  back by retry. A missing row is stale: the job was completed, or never was.
]]
local function checkFence(jobKey, id, token, tokenText)
  local row = redis.pcall('HMGET', jobKey, 'state', 'attempts')
  if row['err'] then
    if string.find(row['err'], 'WRONGTYPE', 1, true) then
      return redis.error_reply('EMQDAMAGE ' .. jobKey .. ' is not a hash; nothing moved')
    end
    return redis.error_reply(row['err'])
  end
  if row[1] == 'active' and tonumber(row[2]) == token then return nil end
  return redis.error_reply('EMQSTALE token ' .. tokenText .. ' does not hold the lease on ' .. id)
end
