"""What the App tells people about a work item: the one progress comment, one-line notices,
endings, set-up notes.
"""
