"""How a model is run: compile modes and what compiling costs, precision and TF32, and the accuracy gate."""
