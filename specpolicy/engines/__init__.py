"""Serving engines specpolicy drives and measures but does not own (llama.cpp's ``llama-server``)."""
