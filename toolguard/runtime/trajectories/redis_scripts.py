"""The Redis store's Lua scripts: each operation on a trajectory's record is one of them, one
round trip, atomic (``redis_store.py`` says what the keys hold).

Every script reads the record's hash with one ``HMGET`` and writes it with one ``HSET``, so
a call's step costs Redis two commands in the common case (the step, nothing new in the
log, no step pending elsewhere) and a third for its begin token (a fourth for a call id no
step was reserved for: ``u:<call id>``, below). Common arguments:
``ARGV[1..9]`` = idle timeout (ms), the replica's log cursor, now (ms), the seen-value bound
(bytes), the replica's floor (the largest step it knows), its token, how long a waiter may
wait (ms), the record's generation as the replica knows it ('' before its first answer), and
the begins and reservations it gave up on (below: JSON, ``redis_given_up.py``); each script's
own follow, events last.

Generations: a record that does not exist is (re)started with a generation of its own
(``g``: now and the token of the replica that starts it). A replica that knew another
generation holds a record the store forgot (its idle expiry, a server restarted empty):
the script reads it the new log from its start, and every sync reply carries the
generation, so the replica sees it and sends what it knows again (``shared_replica.py``);
the floor has already raised T to the steps it knew, so its steps go on from there.

Pending steps: a call that may write (bind, invalidate, see) registers its step as
``p:<step>`` = token .. flags when it begins; its finish (event ``d<step>``, posted: the
call does not wait for it) clears it. A round trip reports the steps other replicas have
pending, and the id of the last entry of the finish stream (``KEYS[3]``), from which a
waiter blocks (``XREAD``) until the next finish lands; finishes append to that stream only
while someone may be waiting (``w``: until when).

Begin tokens: every begin carries a token of its own, and the step it took is kept under it
(``KEYS[4]``), so a begin runs once per token. A begin whose answer the replica did not get
in time (Redis hung or slow: the call went on with a provisional step, ``shared.py``) is
sent with every later round trip of that replica, with its step (provisional, assigned by
another process, or reserved for its call id), until one is answered, and reconciled first,
before the floor is raised: a begin that ran (late) keeps its step, which T counts, and its
pending mark is cleared (its replica never learned it had one); one that did not is marked
given up, which refuses it should it still arrive, and is counted here: at an assigned step
as it is; a call whose id has a step reserved (by any replica) by its reservation (the begin
only consumes ``r:<call id>``); else at its provisional step when no one took that step yet,
else at the next one (T counts each emitted call once; the provisional step may also be
another call's, as its span already says). Either way T counts the call once and no later
begin takes the provisional step. The end that claims the summary clears the pending marks
still there (a process that died mid-call, a replica that never came back to reconcile):
nobody waits for them again.

Reservations (``r:<call id>``) carry a token the same way (kept as ``r``): one not answered
is sent with the steps it gave out provisionally and reconciled first too: kept if it ran
(its calls' begins take the steps it reserved), else marked given up (refused should it
still arrive) and its calls reserved here, each at its provisional step when no one took it
yet, else at the next one; a call id reserved already keeps its step, and one whose call has
begun (``u:<call id>``: a begin found no step reserved for it) is not counted again. Either
way the steps reserved go in the log (``r``: call id, step, ...), so a replica that runs one
of the calls knows its step should its begin not be answered.
"""

from __future__ import annotations

PRELUDE = """
local ttl, cursor, now, limit, floor, token, waitms = tonumber(ARGV[1]), tonumber(ARGV[2]),
  tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6], tonumber(ARGV[7])
local M, L, F, B = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local h = redis.call('HMGET', M, 'n', 'fs', 'fc', 's', 'e', 'ln', 'sb', 'w', 'pc', 'g', 'bk')
local n, fs, fc = tonumber(h[1]) or 0, tonumber(h[2]), h[3]
local claimed, deadline, ln = h[4] and 1 or 0, tonumber(h[5]) or 0, tonumber(h[6]) or 0
local sb, watched, pc = tonumber(h[7]) or 0, tonumber(h[8]) or 0, tonumber(h[9]) or 0
local set, dropped, notify, fresh, bnew = {}, 0, false, false, false
-- a record (re)started here gets a generation; a replica that knew another one reads the
-- new log from its start
local gen = h[10]
if not gen then gen = ARGV[3] .. '-' .. token; set['g'] = gen end
if ARGV[8] ~= '' and ARGV[8] ~= gen then cursor = 0 end
local function raise(step) if step > n then n = step; set['n'] = n end end
local function fail(step, cause)
  if not fs or step < fs then fs = step; fc = cause; set['fs'] = step; set['fc'] = cause end
end
-- a begin token's outcome (its step, or 'x': given up); the hash expires with the record
local function note(tok, v, nx)
  if not h[11] then h[11] = '1'; set['bk'] = 1; bnew = true end
  if nx then return redis.call('HSETNX', B, tok, v) end
  redis.call('HSET', B, tok, v); return 1
end
local function unmark(step)
  if redis.call('HDEL', M, 'p:' .. step) == 1 then
    pc = math.max(pc - 1, 0); set['pc'] = pc; notify = true
  end
end
local function append(batch)
  if ln == 0 then fresh = true end
  redis.call('RPUSH', L, unpack(batch)); ln = ln + #batch; set['ln'] = ln
end
-- steps reserved by call id, in the log, so every replica knows them (module docstring)
local function announce(flat)
  if #flat > 0 then append({'r' .. cjson.encode({token, flat})}) end
end
-- what this replica gave up on (module docstring), in step order, before the floor
local function counted(p) if p > n then raise(p) else n = n + 1; set['n'] = n end; return n end
if ARGV[9] ~= '' then
  for _, g in ipairs(cjson.decode(ARGV[9])) do
    local tok, kind, p = g[1], g[2], g[3]
    local v = redis.call('HGET', B, tok)
    if not v then
      note(tok, 'x', false)
      if kind == 'R' then
        -- written now, not with the hash at the end: a begin in this script reads them
        local flat = {}
        for _, r in ipairs(g[4]) do
          local f = 'r:' .. r[1]
          if r[1] == '' then counted(r[2])
          elseif redis.call('HEXISTS', M, f) == 0 and redis.call('HEXISTS', B, 'u:' .. r[1]) == 0
          then
            local q = counted(r[2])
            redis.call('HSET', M, f, q); flat[#flat + 1] = r[1]; flat[#flat + 1] = q
          end
        end
        announce(flat)
      elseif kind == '=' then raise(p)
      elseif g[4] == '' or redis.call('HDEL', M, 'r:' .. g[4]) == 0 then counted(p) end
    elseif v ~= 'x' and v ~= 'r' then
      local owner = redis.call('HGET', M, 'p:' .. v)
      if owner and string.sub(owner, 1, #token) == token then unmark(v) end
    end
  end
end
-- the steps the replica knows (taken while the store did not answer, or in a record the
-- store forgot since) are never taken again
if floor > 0 then raise(floor) end
local function push(from)
  local batch, added = {}, 0
  for i = from, #ARGV do
    local ev = ARGV[i]
    local t = string.sub(ev, 1, 1)
    if t == 't' or t == 'l' then
      if sb + added + #ev > limit then dropped = dropped + 1
      else added = added + #ev; batch[#batch + 1] = ev end
    elseif t == 'd' then unmark(string.sub(ev, 2))
    elseif t == 'f' then
      local d = cjson.decode(string.sub(ev, 2)); raise(d[2]); fail(d[2], d[3])
    else batch[#batch + 1] = ev end
    if #batch >= 1000 then append(batch); batch = {} end
  end
  if #batch > 0 then append(batch) end
  if added > 0 then sb = sb + added; set['sb'] = sb end
end
-- other replicas' pending steps (step, flags, ...) and the finish stream's mark
local function others()
  local out = {}
  if pc == 0 then return out, '' end
  local all, k = redis.call('HGETALL', M), #token
  for i = 1, #all, 2 do
    local f = all[i]
    if string.sub(f, 1, 2) == 'p:' and string.sub(all[i + 1], 1, k) ~= token then
      out[#out + 1] = string.sub(f, 3); out[#out + 1] = string.sub(all[i + 1], k + 1)
    end
  end
  if #out == 0 then return out, '' end
  set['w'] = now + math.max(10000, 2 * waitms)  -- finishes notify while a waiter may wait
  local last = redis.call('XREVRANGE', F, '+', '-', 'COUNT', 1)
  return out, (last[1] and last[1][1]) or '0-0'
end
-- write the hash once; renew the keys' expiry once they have used up their slack
local function close()
  local slack = math.floor(ttl / 64) + 1
  local renew = deadline - now < ttl
  if renew then deadline = now + ttl + slack; set['e'] = deadline end
  local flat = {}
  for k, v in pairs(set) do flat[#flat + 1] = k; flat[#flat + 1] = v end
  if #flat > 0 then redis.call('HSET', M, unpack(flat)) end
  if notify and watched > now then
    redis.call('XADD', F, 'MAXLEN', '64', '*', 'd', '1')
    redis.call('PEXPIRE', F, deadline - now)
  end
  if renew then
    redis.call('PEXPIRE', M, deadline - now)
    redis.call('PEXPIRE', L, deadline - now)
    redis.call('PEXPIRE', F, deadline - now)
    redis.call('PEXPIRE', B, deadline - now)
  else
    if fresh then redis.call('PEXPIRE', L, deadline - now) end
    if bnew then redis.call('PEXPIRE', B, deadline - now) end
  end
end
-- the log entries since the replica's cursor, read before this script appended its own
local function since(before)
  if before > cursor then return redis.call('LRANGE', L, cursor, before - 1) end
  return {}
end
"""

# ARGV[10] call id, [11] given step, [12] flags, [13] begin token, events.
BEGIN = """
local before, step = ln, nil
local id, given, tok = ARGV[10], ARGV[11], ARGV[13]
if given ~= '' then step = tonumber(given)
elseif id ~= '' then step = tonumber(redis.call('HGET', M, 'r:' .. id)) end
local new = not step
if new then step = n + 1 end
if note(tok, step, true) == 0 then
  -- run already (its step stands), or given up by its replica, which counted it: refused
  local v = redis.call('HGET', B, tok)
  local entries = since(before)
  close()
  return {cursor, entries, n, fs or false, fc or false, claimed, 0, ln, {}, '', gen,
    tonumber(v) or 0}
end
if new then
  n = step; set['n'] = n
  if step == 1 then redis.call('HSETNX', M, 'c', ARGV[3]) end
  -- begun unreserved: a reservation of its id that arrives later does not count it again
  -- (kept with the begin tokens, a hash no script reads whole)
  if id ~= '' then note('u:' .. id, step, false) end
else
  if given ~= '' then raise(step) end
  if id ~= '' then redis.call('HDEL', M, 'r:' .. id) end
end
local pending, mark = others()
if ARGV[12] ~= '' then set['p:' .. step] = token .. ARGV[12]; pc = pc + 1; set['pc'] = pc end
push(14)
local entries = since(before)
close()
return {cursor, entries, n, fs or false, fc or false, claimed, dropped, ln, pending, mark, gen,
  step}
"""

SYNC = """
local before = ln
push(10)
local pending, mark = others()
local entries = since(before)
close()
return {cursor, entries, n, fs or false, fc or false, claimed, dropped, ln, pending, mark, gen}
"""

FINISH = """
push(10)
close()
return dropped
"""

# ARGV[10] token, [11] how many call ids, the ids, events.
RESERVE = """
local before = ln
local k, steps, mine, flat = tonumber(ARGV[11]), {}, {}, {}
if note(ARGV[10], 'r', true) == 0 then
  -- run already, or given up by its replica, which counted it: refused
  for i = 1, k do steps[i] = tonumber(redis.call('HGET', M, 'r:' .. ARGV[11 + i])) or 0 end
  local entries = since(before)
  close()
  return {cursor, entries, n, fs or false, fc or false, claimed, 0, ln, {}, '', gen, steps}
end
redis.call('HSETNX', M, 'c', ARGV[3])
for i = 1, k do
  local id, r = ARGV[11 + i], false
  if id ~= '' then
    r = mine[id] or redis.call('HGET', M, 'r:' .. id) or redis.call('HGET', B, 'u:' .. id)
  end
  if r then steps[i] = tonumber(r)
  else
    n = n + 1; steps[i] = n; set['n'] = n
    if id ~= '' then
      set['r:' .. id] = n; mine[id] = n; flat[#flat + 1] = id; flat[#flat + 1] = n
    end
  end
end
announce(flat)
push(12 + k)
local entries = since(before)
close()
return {cursor, entries, n, fs or false, fc or false, claimed, dropped, ln, {}, '', gen, steps}
"""

JOIN = """
local before = ln
redis.call('HSETNX', M, 'c', ARGV[3])
if ARGV[10] ~= '' then redis.call('HSETNX', M, 'cv', ARGV[10]) end
local k = tonumber(ARGV[11])
for i = 0, k - 1 do set['l:' .. ARGV[12 + 2 * i]] = ARGV[13 + 2 * i] end
push(12 + 2 * k)
local entries = since(before)
close()
return {cursor, entries, n, fs or false, fc or false, claimed, dropped, ln, {}, '', gen}
"""

# ARGV[10] claim ('1'), [11] owner, [12] outcome, [13] hold ('1': not while others' steps
# are pending: answer {2, pending, mark} instead), [14] label count, labels, events.
END = """
local k = tonumber(ARGV[14])
for i = 0, k - 1 do set['l:' .. ARGV[15 + 2 * i]] = ARGV[16 + 2 * i] end
push(15 + 2 * k)
if ARGV[12] ~= '' then set['y'] = ARGV[12] end
local out = {0}
if ARGV[10] == '1' then
  local pending, mark = {}, ''
  if ARGV[13] == '1' then pending, mark = others() end
  if #pending > 0 then out = {2, pending, mark}
  elseif claimed == 0 then
    set['s'] = ARGV[11]; claimed = 1
    -- the marks still pending now are waited for no more (module docstring)
    local all = redis.call('HGETALL', M)
    for i = 1, #all, 2 do
      if string.sub(all[i], 1, 2) == 'p:' then unmark(string.sub(all[i], 3)) end
    end
    if pc ~= 0 then pc = 0; set['pc'] = 0 end
    close()
    return {1, redis.call('HGETALL', M)}
  end
end
close()
return out
"""

SCRIPTS = {
    "begin": BEGIN,
    "sync": SYNC,
    "finish": FINISH,
    "reserve": RESERVE,
    "join": JOIN,
    "end": END,
}
