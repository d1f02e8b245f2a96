"""Gymnasium environments for block-size policy learning."""
