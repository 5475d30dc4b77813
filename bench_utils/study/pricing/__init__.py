"""What a run costs before it runs, with no torch; imports run one way: prior <- prices (the one rule) <- plan."""
