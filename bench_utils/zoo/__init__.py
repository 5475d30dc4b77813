"""The model zoo: the guide's 12 models (registry and offline architectures), any Hugging Face checkpoint or timm model, and their inputs."""
