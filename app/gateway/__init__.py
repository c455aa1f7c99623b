"""The model gateway: a session reaches the model only through it, holding a pass that dies
with the session, while the operator's credential stays in the spawner. It relays each
answer unchanged and counts its tokens per work item (relay, passes, forwarding, metering).
"""
