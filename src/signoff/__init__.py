"""signoff."""
