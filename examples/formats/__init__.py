"""Eval files in the formats of existing eval setups (SPEC §12), and an offline agent to pass."""
