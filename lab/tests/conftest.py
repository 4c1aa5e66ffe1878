"""The lab's scripts and trial kernels stay runnable: their tests run in CI beside the product's.

They share the product tests' set-up (Triton's interpreter on a machine without a GPU, the ``gpu``
marker's skip), imported from ``tests/conftest.py``.
"""

from tests.conftest import pytest_collection_modifyitems

__all__ = ["pytest_collection_modifyitems"]
