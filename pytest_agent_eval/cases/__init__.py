"""Reading eval files into cases: the loaders, the schema and the dialects.

The case model is in ``core``.
"""
