"""The study: grid files, the resumable runner and its lease, notebook execution, and one measured cell."""
