-- wrk script for bench/ingest.py: POSTs the signed fixture body with a unique delivery id per
-- request. Bodies differ too (the App stores a body once whatever the delivery id): each
-- request splices its own number into the body, whose signature bench/ingest.py computed
-- beforehand, one per line of INGEST_SIGNATURES, PER_THREAD lines for each wrk thread.
-- A thread reads only its own PER_THREAD lines, in init(): wrk builds each thread's script
-- state while the threads started before it already send, so reading the whole file there
-- took the CPU from the App under measurement at the start of every run.
local prefix_path = os.getenv("INGEST_PREFIX")
local suffix_path = os.getenv("INGEST_SUFFIX")
local event = os.getenv("INGEST_EVENT")
local per_thread = tonumber(os.getenv("INGEST_PER_THREAD"))
local offset = tonumber(os.getenv("INGEST_OFFSET"))

local function slurp(path)
  local f = assert(io.open(path, "rb"))
  local data = f:read("*a")
  f:close()
  return data
end

local body_prefix = slurp(prefix_path)
local body_suffix = slurp(suffix_path)
local signatures = {}

-- This thread's slice of the signatures file, whose lines all have the same length.
local function own_signatures(first)
  local f = assert(io.open(os.getenv("INGEST_SIGNATURES"), "rb"))
  local line_bytes = #f:read("*l") + 1
  f:seek("set", first * line_bytes)
  for _ = 1, per_thread do
    table.insert(signatures, f:read("*l"))
  end
  f:close()
end

local threads = {}
local counter = 0
prefix = ""
index = 0

function setup(thread)
  -- INGEST_ID tells apart wrk processes started in the same second (one per replica)
  local id = os.getenv("INGEST_ID") or ""
  thread:set("prefix", "bench-" .. id .. tostring(#threads) .. "-" .. tostring(os.time()))
  thread:set("index", #threads)
  table.insert(threads, thread)
end

function init(args)
  own_signatures(offset + index * per_thread)
end

function request()
  -- past PER_THREAD requests the bodies repeat and are acknowledged as duplicates
  local k = counter % per_thread
  local n = offset + index * per_thread + k
  counter = counter + 1
  local headers = {
    ["Content-Type"] = "application/json",
    ["X-GitHub-Event"] = event,
    ["X-Hub-Signature-256"] = signatures[k + 1],
    ["X-GitHub-Delivery"] = prefix .. "-" .. counter,
  }
  return wrk.format("POST", "/github/webhooks", headers, body_prefix .. n .. body_suffix)
end

function done(summary, latency, requests)
  local non2xx = summary.errors.status
  io.write(string.format(
    "JSON {\"requests\": %d, \"duration_us\": %d, \"p50_us\": %d, \"p99_us\": %d, " ..
    "\"max_us\": %d, \"non2xx\": %d, \"socket_errors\": %d}\n",
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    latency.max, non2xx,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
end
