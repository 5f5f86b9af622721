"""Enforcement: OpenFlow messages, entry builders, desired tables, reconciliation, host-chosen ports."""
