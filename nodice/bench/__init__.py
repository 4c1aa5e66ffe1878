"""Benchmarks of nodice itself: how well the BI gate detects violations (``nodice bench detector``)."""
