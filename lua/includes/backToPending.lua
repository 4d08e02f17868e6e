--- @include "zaddZero"
--[[
  backToPending(jobPrefix, pendingKey, ids): state pending on each row and
  every id into pending at score 0, where mint order puts it back in line.
  The move both pumps end with; one HSET per row is all it costs.
]]
local function backToPending(jobPrefix, pendingKey, ids)
  for i = 1, #ids do
    redis.call('HSET', jobPrefix .. ids[i], 'state', 'pending')
  end
  zaddZero(pendingKey, ids)
end
