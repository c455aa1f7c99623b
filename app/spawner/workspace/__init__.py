"""A work item's checkout on the host: cloned and reused, touched only through the one git
door that neutralises what a session wrote, and read for evidence and leftovers."""
