"""The study on a Ray cluster: one task per kernel group and accelerator type, one results file."""
