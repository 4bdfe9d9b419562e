-- Shared by the lease scripts (prepended by extenders/sync/store/base.py): ARGV[1] is the key prefix.
local P = ARGV[1]
local K_LEADER = P .. ':leader'
local K_EPOCH = P .. ':epoch'
