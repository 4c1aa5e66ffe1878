"""``torch.nn`` modules a candidate builds in ``__init__`` and calls in ``forward``.

``self.fc = nn.Linear(…)`` then ``self.fc(x)`` is ``F.linear(x, self.fc.weight, self.fc.bias)``:
the same library GEMM, chosen by the same shapes, as the functional call the analyzer already
judges. A module is followed as the functional call it makes; one whose output for a sample depends
on that sample alone (an activation, a per-sample norm, a pool) keeps its input's batch axis; any
other module stays what it was, a call the analyzer does not follow.
"""

from __future__ import annotations

from typing import Any

from nodice.gate.static.values import V

# Modules that call a library kernel chosen from the input's shape: the functional they run.
LIBRARY = {
    "Linear": "linear",
    "LazyLinear": "linear",
    "Conv1d": "conv1d",
    "Conv2d": "conv2d",
    "Conv3d": "conv3d",
    "LazyConv1d": "conv1d",
    "LazyConv2d": "conv2d",
    "LazyConv3d": "conv3d",
    "ConvTranspose1d": "conv_transpose1d",
    "ConvTranspose2d": "conv_transpose2d",
    "ConvTranspose3d": "conv_transpose3d",
    "LazyConvTranspose1d": "conv_transpose1d",
    "LazyConvTranspose2d": "conv_transpose2d",
    "LazyConvTranspose3d": "conv_transpose3d",
}
# Modules whose reduction axis is a constructor argument: the functional, called with it.
ALONG_DIM = {"Softmax": "softmax", "LogSoftmax": "log_softmax", "Softmin": "softmin"}
# Modules whose output for a sample is computed from that sample alone, whatever the mode.
PER_SAMPLE = {
    "Identity",
    "Flatten",
    "ReLU",
    "ReLU6",
    "LeakyReLU",
    "PReLU",
    "RReLU",
    "GELU",
    "SiLU",
    "Mish",
    "Tanh",
    "Tanhshrink",
    "Sigmoid",
    "LogSigmoid",
    "Hardtanh",
    "Hardswish",
    "Hardsigmoid",
    "Hardshrink",
    "Softshrink",
    "ELU",
    "SELU",
    "CELU",
    "GLU",
    "Softplus",
    "Softsign",
    "Threshold",
    "LayerNorm",
    "GroupNorm",
    "RMSNorm",
    "LocalResponseNorm",
    "MaxPool1d",
    "MaxPool2d",
    "MaxPool3d",
    "AvgPool1d",
    "AvgPool2d",
    "AvgPool3d",
    "AdaptiveAvgPool1d",
    "AdaptiveAvgPool2d",
    "AdaptiveAvgPool3d",
    "AdaptiveMaxPool1d",
    "AdaptiveMaxPool2d",
    "AdaptiveMaxPool3d",
    "LPPool1d",
    "LPPool2d",
    "PixelShuffle",
    "PixelUnshuffle",
    "Upsample",
    "ZeroPad2d",
    "ConstantPad1d",
    "ConstantPad2d",
    "ConstantPad3d",
    "ReflectionPad1d",
    "ReflectionPad2d",
    "ReplicationPad1d",
    "ReplicationPad2d",
    "ReplicationPad3d",
}
# What a module's attributes hold: its parameters and buffers are tensors without a batch axis.
PARAMETERS = {"weight", "bias", "running_mean", "running_var", "in_proj_weight", "in_proj_bias"}


def constructed(name: str, args: list[V], kwargs: dict[str, V]) -> V | None:
    """``nn.Linear(…)``, ``torch.nn.modules.conv.Conv2d(…)``: the module as a value the analyzer can
    call; ``None`` for anything else (another module, a function of ``torch.nn.functional``)."""
    parts = name.split(".")
    cls = parts[-1]
    if "nn" not in parts[:-1] or "functional" in parts:
        return None
    if cls in LIBRARY:
        return V(kind="nnmodule", ref=("library", LIBRARY[cls], ()))
    if cls in ALONG_DIM:
        dim = kwargs.get("dim", args[0] if args else None)
        extra = (("dim", dim),) if dim is not None else ()
        return V(kind="nnmodule", ref=("along_dim", ALONG_DIM[cls], extra))
    if cls in PER_SAMPLE:
        return V(kind="nnmodule", ref=("per_sample", cls, ()))
    return None


def attribute(attr: str) -> V:
    """``self.fc.weight``: a parameter (a tensor without the batch axis); any other attribute
    (``in_features``, ``stride``) a plain value."""
    return V(kind="tensor") if attr in PARAMETERS else V()


def call_form(module: V) -> tuple[str, str, dict[str, Any]]:
    """How a call of the module is followed: ``(how, functional name, extra keyword arguments)``."""
    how, fn, extra = module.ref
    return how, fn, dict(extra)
