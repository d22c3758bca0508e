"""Measurement of the machine at hand (needs PyTorch)."""
