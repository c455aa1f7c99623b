"""What a work item and the installation spend: usage, costs, item budgets, spend caps, and how
often a session may post.
"""
