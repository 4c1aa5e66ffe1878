"""Shipped contracts: one executable Python file per layer (global, family_*, subtype_*).

They are read by ``nodice.gate.static.contracts.parse_contract_file``; the
file names decide nothing, the ``contract(...)`` call in each file does.
"""
