"""Data: one TOML file per device (devices/) and per model preset (models/), every number sourced."""
