"""A work item's lifecycle: its states and their one table of transitions, the events that move
it, the jobs it sends, who may act on it.
"""
