"""Rule ``uninitialised-memory``: the output may not rely on what freed memory happens to hold.

A kernel that skips work on a repeated call and returns ``torch.empty``
memory gets the previous call's answer back from the caching allocator. The same
inputs are run again after the freed blocks are filled with NaN: a kernel that
was right the first time must be right again.
"""

from __future__ import annotations

RULE = "uninitialised-memory"
DESCRIPTION = "returns memory it never wrote, which held a previous result"
