"""Calibration cards: pure statistics and their presentation."""
