"""A hostile session's search, as a script: `python3 search.py <targets.json> <report.json>`.

It looks for the App's and the spawner's secrets everywhere it can — every process environment
it can see, the files it is told of, every file under the directories it is told to walk — and
tries each token it found on the App (and its own session token on another work item). The
report lists what it found; `found` is empty when it found nothing.
"""

SEARCH = r"""import json, os, re, sys, urllib.error, urllib.request
targets = json.load(open(sys.argv[1]))
item = os.environ.get("THE_LOOP_WORK_ITEM_ID", "unknown")
own = os.environ.get("THE_LOOP_SESSION_TOKEN", "")
mine = {"THE_LOOP_SESSION_TOKEN", "ANTHROPIC_API_KEY"}  # its own, and the harness's
harness = "CLAUDE_CODE_"  # what Claude Code hands its own tools (e.g. its messaging token)
secretish = re.compile(r"TOKEN|SECRET|PRIVATE|PASSWORD|DATABASE_URL", re.I)
tokens = re.compile(r"(?:tlsp_|tlss_|ghs_)[A-Za-z0-9_-]{16,}")
marks = ("PRIVATE KEY-----", "GITHUB_WEBHOOK_SECRET", "ssh-key-of-the-devbox-user")
found, texts, pids = [], [], 0
for pid in sorted(p for p in os.listdir("/proc") if p.isdigit()):
    try:
        blob = open(f"/proc/{pid}/environ", "rb").read().decode(errors="replace")
    except OSError:
        continue
    pids += 1
    for entry in blob.split("\0"):
        name, _, value = entry.partition("=")
        if secretish.search(name) and name not in mine and not name.startswith(harness):
            found.append({"environ": pid, "name": name})
        texts.append(value)
def look(path):
    try:
        text = open(path, "rb").read(1 << 20).decode(errors="replace")
    except OSError:
        return
    texts.append(text)
    if any(m in text for m in marks) or set(tokens.findall(text)) - {own}:
        found.append({"file": path})
for path in targets["files"]:
    if os.path.exists(path):
        found.append({"exists": path})
        look(path)
for top in targets["walk"]:
    for folder, dirs, files in os.walk(top):
        dirs[:] = [d for d in dirs if os.path.join(folder, d) not in targets["skip"]]
        for name in files:
            look(os.path.join(folder, name))
app = os.environ.get("THE_LOOP_URL", "")
def call(path, token, body=None):
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(app + path, data=data, headers={
        "Authorization": "Bearer " + token, "Content-Type": "application/json"})
    try:
        return urllib.request.urlopen(request, timeout=10).status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0
candidates = sorted({t for text in texts for t in tokens.findall(text)} - {own})
for token in candidates:
    if call("/spawner/v1/jobs?wait=0", token) in (200, 204):
        found.append({"app_accepted": token[:5]})
if own and call("/spawner/v1/comments", own, {"work_item_id": targets["other_item"],
        "kind": "comment", "body": "hi"}) == 200:
    found.append({"posted_on_another_item": targets["other_item"]})
report = {"found": found, "pids": pids, "tokens_tried": len(candidates),
          "own_checkout_readable": os.path.exists("README.md"), "home": os.environ.get("HOME")}
with open(sys.argv[2] + ".tmp", "w") as fh:
    json.dump(report, fh)
os.replace(sys.argv[2] + ".tmp", sys.argv[2])
print(f"searched {pids} processes and {len(targets['files'])} files; found {len(found)}")
"""

HARNESS = r"""#!{python}
# A hostile harness: runs the search, then behaves like a session (shows an input box,
# reads its terminal).
import os, runpy, sys, tty, urllib.parse
here = os.path.dirname(os.path.abspath(__file__))
out = os.path.join({records!r}, urllib.parse.quote(os.environ["THE_LOOP_WORK_ITEM_ID"], safe=""))
os.makedirs(out, exist_ok=True)
sys.argv = ["search", os.path.join(here, "targets.json"), os.path.join(out, "found.json")]
runpy.run_path(os.path.join(here, "search.py"))
if os.isatty(0):
    tty.setraw(0)
rule = "\u2500" * 40
sys.stdout.write("hostile\r\n\r\n" + rule + "\r\n\u276f \r\n" + rule + "\r\n")
sys.stdout.flush()
while os.read(0, 65536):
    pass
"""
