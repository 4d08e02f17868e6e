--[[
  checkJobId(id): nil when id is a well-formed JOB id, else the error reply.
  EMQID for a malformed id, EMQKIND for a well-formed id of another kind.
  The common case is one length test and one pattern match, allocating
  nothing: 2^64-1 in base62 is 'LygHa16AHYF', so a first digit below 'L'
  ([0-9A-K]) is always in range. Above that the digits are compared byte
  by byte: base62's alphabet is in ASCII order, so byte order is numeric
  order. Lua's < and > on strings call strcoll, which follows the server's
  collation locale: under en_US.UTF-8 'Lyga...' sorts below 'LygH...' and
  'LZ...' above 'Ly...', so a string compare would accept an id past the
  bound and refuse one within it.
]]
--- @include "jobIdShape"
local function checkJobId(id)
  if #id == 14 and string.find(id, JOB_ID_SHAPE) then
    return nil
  end
  local malformed = #id ~= 14 or not string.find(id, '^[A-Z][A-Z][A-Z][0-9A-Za-z]+$')
  if not malformed then
    -- Inline, not a helper: every call of every verb would pay for its closure.
    local bound = 'LygHa16AHYF'
    for i = 1, 11 do
      local have, most = string.byte(id, i + 3), string.byte(bound, i)
      if have ~= most then
        malformed = have > most
        break
      end
    end
  end
  if malformed then
    return redis.error_reply('EMQID id must be 3 upper-case letters and 11 base62 digits')
  end
  if string.sub(id, 1, 3) ~= 'JOB' then
    return redis.error_reply('EMQKIND id kind ' .. string.sub(id, 1, 3) .. ' is not JOB')
  end
  return nil
end
