"""Eval files in the formats of existing eval setups (SPEC §12), with an offline agent they pass
with.
"""
