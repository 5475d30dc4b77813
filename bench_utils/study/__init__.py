"""The study, by where its code runs: grid files and the runner on the host, the measured cell in its kernel."""
