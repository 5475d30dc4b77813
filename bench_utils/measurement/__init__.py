"""Measurement: timing, interleaved comparison, statistics, memory and the timer check, on CPU and CUDA; knows nothing of models, notebooks or reports."""
