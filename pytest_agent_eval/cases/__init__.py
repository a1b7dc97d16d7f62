"""Reading eval files into cases: the loaders, the schema and the dialects (the case model is in
``core``).
"""
