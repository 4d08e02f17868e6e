--[[
  checkJobId(id): nil when id is a well-formed JOB id, else the error reply.
  EMQID for a malformed id, EMQKIND for a well-formed id of another kind.
  The common case is one length test and one pattern match, allocating
  nothing: 2^64-1 in base62 is 'LygHa16AHYF', so a first digit below 'L'
  ([0-9A-K]) is always in range; fixed width and an ASCII-ordered alphabet
  make the string compare below a numeric compare.
]]
local function checkJobId(id)
  if #id == 14 and string.find(id, '^JOB[0-9A-K][0-9A-Za-z]+$') then
    return nil
  end
  if #id ~= 14 or not string.find(id, '^[A-Z][A-Z][A-Z][0-9A-Za-z]+$')
      or string.sub(id, 4) > 'LygHa16AHYF' then
    return redis.error_reply('EMQID id must be 3 upper-case letters and 11 base62 digits')
  end
  if string.sub(id, 1, 3) ~= 'JOB' then
    return redis.error_reply('EMQKIND id kind ' .. string.sub(id, 1, 3) .. ' is not JOB')
  end
  return nil
end
