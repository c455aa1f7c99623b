"""What a job, a launch or a watch does with the spawner's context (`context.SpawnerContext`):
a session's limits and closed network opened and closed, the disk watch, a dialog's answer,
a job's checkout made ready. Each takes the context whole, so these sit above it, and above
the rooms whose host-side objects it holds."""
