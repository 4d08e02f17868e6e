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

  The server is asked once per call: every row a call reads is its queue's,
  in the one slot of the queue's hash tag, so the answer for the first
  missing row holds for all. A pump over 100,000 missing rows would
  otherwise run CLUSTER NODES, whose text grows with the cluster, per row.
]]
-- nil until asked; then false (no move here) or the refusal the call answers.
local slotMoving
local function rowInFlight(jobKey)
  if slotMoving ~= nil then return slotMoving or nil end
  slotMoving = false
  local nodes = redis.pcall('CLUSTER', 'NODES')
  if type(nodes) ~= 'string' then
    local why = type(nodes) == 'table' and nodes['err'] or 'CLUSTER NODES gave no text'
    if not string.find(why, 'cluster support disabled', 1, true) then slotMoving = why end
    return slotMoving or nil
  end
  local slot = redis.call('CLUSTER', 'KEYSLOT', jobKey)
  local own = string.match(nodes, '[^\n]*myself[^\n]*') or ''
  if string.find(own, '[' .. slot .. '-', 1, true) then
    slotMoving = 'TRYAGAIN ' .. jobKey .. ' may be on another node while slot ' .. slot .. ' moves; nothing moved'
  end
  return slotMoving or nil
end
