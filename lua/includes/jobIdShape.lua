--[[
  JOB_ID_SHAPE: the pattern every JOB id below 'L' in its first digit
  matches, 14 bytes long: kind JOB and 11 base62 digits, the first in
  [0-9A-K], so its value is below 2^64 ('LygHa16AHYF') whatever follows.
  A healthy call tests an id with it and its length alone; an id it does
  not match is judged by checkJobId, which also tells the ids from 'L' up
  that are still in range. The class lists lower case first: a pattern
  tries its ranges in order, and 26 of 62 digits are lower case.
]]
local JOB_ID_SHAPE = '^JOB[0-9A-K][a-zA-Z0-9]+$'
