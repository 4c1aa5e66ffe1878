"""The detector benchmark: how well the BI gate detects violations on a labeled pool of candidates.

``pool`` reads the labeled pool, ``oracle`` and ``labeling`` label it by brute
force, ``run`` scores static-only, dynamic-only and the full gate against the
labels, ``report`` renders the table, ``workers`` runs the candidates in
processes of their own.
"""
