"""Confining a session: the bubblewrap sandbox, what it may see of this machine, the home it
gets, the trust pre-seed, and the process hardening of the host side."""
