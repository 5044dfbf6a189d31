"""kernelgate: verified, fairly timed, faster PyTorch implementations for a hardware target."""
__version__ = "0.1.0"
