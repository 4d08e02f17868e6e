--[[
  readRow(jobKey, state, claiming): the row's attempts (and, claiming, its
  payload) when the row is a hash in `state` with an attempts of plain
  decimal digits, at most 2^53 (claiming: below it, so that the token,
  attempts + 1, is one complete and retry take, and a payload); else nil
  and what is wrong with it, which the job is buried with; else, when the
  server refused the read for another reason than the key's type (an ACL
  without HMGET, say), nil, nil and that refusal, which the caller returns
  having moved nothing. A row can be missing (evicted under a
  policy other than noeviction, or deleted by hand), hold another type, or
  carry fields no script wrote; the read goes through pcall so that none of
  these raises inside a script that has already moved ids. A missing row
  on a cluster node whose slot is moving may be on the other node: that is
  the server's refusal too (rowInFlight), not damage.

  The attempts is read as intArg reads an argument: tonumber alone takes
  'inf', '1e400', '0x10', '1e3' and ' 7', and rounds past 2^53, so such a
  row would be handed out with a token no complete accepts (inf reaches the
  reply as INT64_MIN). A 16-digit attempts is compared as text, which for
  digit strings of one length is numeric order.
]]
--- @include "rowInFlight"
local function readRow(jobKey, state, claiming)
  local row
  if claiming then
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
  local text = row[2] or ''
  if not ((#text < 16 or #text == 16 and text <= '9007199254740992') and string.find(text, '^%d+$')) then
    return nil, 'attempts is not plain digits up to 2^53'
  end
  if claiming then
    if text == '9007199254740992' then return nil, 'attempts is 2^53, the last token' end
    if not row[3] then return nil, 'payload missing' end
  end
  return tonumber(text), row[3]
end
