"""capacity."""
