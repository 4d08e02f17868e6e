--[[
  buryDamaged(jobPrefix, deadKey, id, why): a job whose row cannot be read
  goes to the dead set, where a person browsing it finds it, instead of
  vanishing or stopping the batch it came in. A missing row or a hash gets
  state dead and last_error 'damaged: <why>'; a key of another type is left
  as it was found, for inspection, and only its id moves. The caller has
  checked that deadKey is a sorted set.
]]
local function buryDamaged(jobPrefix, deadKey, id, why)
  local jobKey = jobPrefix .. id
  local kind = redis.call('TYPE', jobKey)['ok']
  if kind == 'hash' or kind == 'none' then
    redis.call('HSET', jobKey, 'state', 'dead', 'last_error', 'damaged: ' .. why)
  end
  redis.call('ZADD', deadKey, 0, id)
end
