"""Rendering results: rich tables, JSON, charts."""
