--[[
  readRow(jobKey, state, withPayload): the row's attempts (and payload) when
  the row is a hash in `state` with a whole, non-negative attempts (and a
  payload); else nil and what is wrong with it, which the job is buried with;
  else, when the server refused the read for another reason than the key's
  type (an ACL without HMGET, say), nil, nil and that refusal, which the
  caller returns having moved nothing. A row can be missing (evicted under a
  policy other than noeviction, or deleted by hand), hold another type, or
  carry fields no script wrote; the read goes through pcall so that none of
  these raises inside a script that has already moved ids. A missing row
  on a cluster node whose slot is moving may be on the other node: that is
  the server's refusal too (rowInFlight), not damage.
]]
--- @include "rowInFlight"
local function readRow(jobKey, state, withPayload)
  local row
  if withPayload then
    row = redis.pcall('HMGET', jobKey, 'state', 'attempts', 'payload')
  else
    row = redis.pcall('HMGET', jobKey, 'state', 'attempts')
  end
  if row['err'] then
    if string.find(row['err'], 'WRONGTYPE', 1, true) then return nil, 'row is not a hash' end
    return nil, nil, row['err']
  end
  if not row[1] and not row[2] then
    local moving = rowInFlight(jobKey)
    if moving then return nil, nil, moving end
    return nil, 'row missing'
  end
  if row[1] ~= state then return nil, 'row state is ' .. tostring(row[1] or 'missing') .. ', not ' .. state end
  local attempts = tonumber(row[2])
  if not attempts or attempts < 0 or attempts ~= math.floor(attempts) then
    return nil, 'attempts is not a whole number'
  end
  if withPayload and not row[3] then return nil, 'payload missing' end
  return attempts, row[3]
end
