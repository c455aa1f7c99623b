"""What people decide on a work item, from any surface: execute, answers, gates (review and
approvals), follow-ups, egress allows, and the walk through the phases.
"""
