"""Adapters that let other tools use nodice: exporters and evaluators for third-party search frameworks."""
