-- wrk script for bench/ingest: POSTs one signed fixture body with a unique delivery id per
-- request (the signature covers only the body, so it is computed once by bench/ingest).
local body_path = os.getenv("INGEST_BODY")
local signature = os.getenv("INGEST_SIGNATURE")
local event = os.getenv("INGEST_EVENT")
local f = assert(io.open(body_path, "rb"))
local body = f:read("*a")
f:close()

local threads = {}
local counter = 0
prefix = ""

function setup(thread)
  thread:set("prefix", "bench-" .. tostring(#threads) .. "-" .. tostring(os.time()))
  table.insert(threads, thread)
end

function request()
  counter = counter + 1
  local headers = {
    ["Content-Type"] = "application/json",
    ["X-GitHub-Event"] = event,
    ["X-Hub-Signature-256"] = signature,
    ["X-GitHub-Delivery"] = prefix .. "-" .. counter,
  }
  return wrk.format("POST", "/github/webhooks", headers, body)
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
