"""Inside a task notebook's kernel: measuring cells, with torch, and writing their records."""
