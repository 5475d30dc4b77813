"""Re-running a published study in the versions it was measured with, and comparing the two."""
