--[[
  rowInFlight(jobKey): the TRYAGAIN error message when this server is a
  cluster node whose slot of jobKey is migrating or importing, else nil.
  Asked only of a row found missing. While a slot moves, a node that
  imports it serves a client that sent ASKING as if it held every key, so
  a row still on the old node reads as missing there, and burying the job
  as damage would write a second row that the migration of the first then
  refuses (BUSYKEY). The migrating node refuses such a read by itself
  ("non local key"), but its open migration is read here the same way.
  CLUSTER NODES marks an open move on the node's own line as
  [<slot>->-<node>] or [<slot>-<-<node>]; a server without cluster support
  says so, and a missing row there is damage. Any other refusal (an ACL
  without cluster|nodes) leaves the question open, so it is the call's
  refusal too: a guess of "no cluster" would bury the job mid-move.
]]
local function rowInFlight(jobKey)
  local nodes = redis.pcall('CLUSTER', 'NODES')
  if type(nodes) ~= 'string' then
    local why = type(nodes) == 'table' and nodes['err'] or 'CLUSTER NODES gave no text'
    if string.find(why, 'cluster support disabled', 1, true) then return nil end
    return why
  end
  local slot = redis.call('CLUSTER', 'KEYSLOT', jobKey)
  local own = string.match(nodes, '[^\n]*myself[^\n]*') or ''
  if not string.find(own, '[' .. slot .. '-', 1, true) then return nil end
  return 'TRYAGAIN ' .. jobKey .. ' may be on another node while slot ' .. slot .. ' moves; nothing moved'
end
