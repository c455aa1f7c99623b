"""The phase-selection gate: the one path from an issue comment to a frozen choice.

Pure parts (checklist, render, parse, classify, freeze, confirm) take values and return
values; `execute` and `issue_io` are the thin edges that read the store and call GitHub.
"""
