"""What a user measures on their own machine: its cost tables, and an accelerator against the CPU (timings
live here, never in test assertions; the project's own benchmarks: ``python -m benchmarks``, a checkout)."""
