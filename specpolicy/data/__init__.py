"""Prompt datasets: offline built-ins, hub-backed sets and local files."""
