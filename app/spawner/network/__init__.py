"""A session's own network: the plan of what it may reach, the relays into its namespace,
the host's side of them, and the allow-listing egress proxy."""
