"""GitHub edge: webhook ingress, the router table, and the githubkit client."""
