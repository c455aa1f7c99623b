"""Fakes that sit at the network boundary: small HTTP servers speaking real REST shapes."""
