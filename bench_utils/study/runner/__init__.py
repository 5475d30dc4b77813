"""The runner on the host: kernels as processes, devices and locks, resume, progress, estimates, limits."""
