"""Formats of existing eval setups (SPEC §12), each detected from a file's shape."""
