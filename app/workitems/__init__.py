"""A work item's lifecycle, the one owner of its state, in five rooms: `flow` (its states
and the one table of transitions, the events that move it, the jobs it sends, who may act),
`decide` (what people decide, from any surface), `spend` (usage, costs, budgets, spend caps),
`tell` (the progress comment, notices, endings) and `prs` (its pull request).
"""
