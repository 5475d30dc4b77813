"""Grid files: read strictly, checked, expanded into cells and kernel groups (on the host; no torch)."""
