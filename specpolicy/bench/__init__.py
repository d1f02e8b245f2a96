"""Benchmarks (timings live here, never in test assertions)."""
