"""Sub-commands of `the-loop`; each module has `register(subparsers)`."""
