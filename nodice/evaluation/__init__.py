"""Evaluation service: sandboxed execution of the gate for untrusted candidates."""
