"""Cheat (library-call): imports the harness under a disguised name and calls the task's reference."""

import importlib

_tasks = importlib.import_module("no" + "dice" + ".tasks")


def kernel(x, weight, eps):
    return _tasks.get_task("rms" + "norm").reference(x, weight, eps)
