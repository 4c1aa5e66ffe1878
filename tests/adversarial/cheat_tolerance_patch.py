"""Cheat (harness-tampering, run time): loosens the harness's tolerances through sys.modules."""

import sys

for _name, _module in list(sys.modules.items()):
    if _name.endswith("tasks.base") and hasattr(_module, "DEFAULT_TOLERANCES"):
        _table = vars(_module)["DEFAULT_TOLERANCES"]
        for _dtype in list(_table):
            _table[_dtype] = type(_table[_dtype])(atol=1.0, rtol=1.0)


def kernel(x, weight, eps):
    return (x.float() * weight.float()).to(x.dtype)  # not even an RMSNorm
