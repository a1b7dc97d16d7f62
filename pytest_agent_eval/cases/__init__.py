"""Reading eval files: documents with line positions, the case model, the schema and the dialects."""
