"""mstop's tests."""
