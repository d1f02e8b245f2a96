"""Serving engines specpolicy does not own, driven and measured by it (today llama.cpp's ``llama-server``). No
torch."""
