"""Where an evaluation ran: library versions, device, host — stored with every result."""

from __future__ import annotations

import platform
import socket
import sys
from typing import Any


def describe_environment(device: str) -> dict[str, Any]:
    """Plain Python values only: the parent unpickles this without importing torch (``torch.__version__``
    is a ``TorchVersion``, whose unpickling alone would cost the parent a torch import)."""
    import torch

    env: dict[str, Any] = {
        "host": socket.gethostname(),
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
        "torch": str(torch.__version__),
        "device": device,
    }
    try:
        import triton

        env["triton"] = triton.__version__
    except ImportError:  # pragma: no cover - triton is a dependency
        env["triton"] = None
    env["numpy"] = sys.modules["numpy"].__version__ if "numpy" in sys.modules else None
    if device == "cuda" and torch.cuda.is_available():
        idx = torch.cuda.current_device()
        props = torch.cuda.get_device_properties(idx)
        env.update(
            {
                "cuda": str(torch.version.cuda),
                "cudnn": torch.backends.cudnn.version(),
                "gpu": props.name,
                "gpu_memory_gb": round(props.total_memory / 2**30, 1),
                "sm_count": props.multi_processor_count,
                "capability": f"{props.major}.{props.minor}",
            }
        )
    else:
        env.update(
            {
                "cuda": None if torch.version.cuda is None else str(torch.version.cuda),
                "gpu": None,
                "cpu": platform.processor() or platform.machine(),
            }
        )
    return env
