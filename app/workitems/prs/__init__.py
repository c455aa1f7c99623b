"""A work item's pull request: opened through the App, its traffic back into the session, pull-
request sessions.
"""
