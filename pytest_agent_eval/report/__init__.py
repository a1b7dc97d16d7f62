"""What users read: failure text, summaries and report files."""
