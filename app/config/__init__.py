"""What the App and every spawner are told: the operator config (`cli-config.yaml`: harnesses,
models, routing, the sandbox) and the process settings (secrets, URLs and paths from the
environment or `.env`), each read once, checked, and shown with where each value came from."""
