"""Fused residual-add + RMSNorm: the residual sum is part of the sample and must be rounded alike."""

from nodice.gate.static.contracts import contract, reduction_tiles

contract("fused_add_rmsnorm", subtype_of="normalization", tasks=["add_rmsnorm"])

reduction_tiles("BLOCK_R", "BLOCK_RES")
