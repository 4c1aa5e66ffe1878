"""FlashInfer-Bench's sampling definitions on the catalog's ``sampling`` task.

``top_k_sampling_from_probs_v{V}``, ``top_p_sampling_from_probs_v{V}`` and
``top_k_top_p_sampling_from_probs_v{V}`` take probabilities (``probs[batch_size, vocab_size]``
fp32, after softmax) and the filter parameters they name, and return ``samples[batch_size]``
int64. The task's requests become those inputs: ``probs = softmax(logits / temperature)``, a greedy
request (temperature 0) a one-hot row at its argmax (every filter keeps it, every draw returns it),
and a parameter the definition does not take is the one that filters nothing (``top_k`` 0,
``top_p`` 1), in the solution's inputs and in the distribution it is judged against alike.

The definitions have no seed: a solution draws from torch's global generator, so a request's
token depends on how many draws the requests before it took. The adapter seeds that generator from
the first request's seed before every call, and the definition task judges invariance with the
target first in its batch, where its random numbers are the same whatever the batch: a choice of
algorithm, tile or reduction order that follows the batch still shows in its token.
"""

from __future__ import annotations

from typing import Any

import torch

from nodice.tasks.definition_interface import Adapter, Consts, single


def request_probs(logits: torch.Tensor, temperature: torch.Tensor) -> torch.Tensor:
    """``softmax(logits / temperature)`` per request in float64, rounded to fp32; one-hot when greedy.

    One request at a time, so that a request's probabilities are the same bits in any batch (a
    reduction over a lone row may be split differently from one over many rows).
    """
    probs = torch.empty(logits.shape, dtype=torch.float32, device=logits.device)
    for i, t in enumerate(temperature.tolist()):
        row = logits[i].double()
        if t <= 0.0:
            probs[i] = torch.nn.functional.one_hot(row.argmax(), row.numel()).float()
        else:
            probs[i] = torch.softmax(row / t, dim=0).float()
    return probs


def sampling_inputs(a: tuple[Any, ...], consts: Consts) -> dict[str, Any]:
    logits, temperature, top_k, top_p, seed = a
    # The definitions draw from torch's global generator: seeded by the first request (see above).
    torch.manual_seed(int(seed[0]))
    return {"probs": request_probs(logits, temperature), "top_k": top_k, "top_p": top_p}


def _sampler(name: str, params: tuple[str, ...]) -> Adapter:
    return Adapter(
        task="sampling",
        kind=name,
        batch_axis="batch_size",
        inputs=("probs", *params),
        outputs=("samples",),
        to_definition=sampling_inputs,
        from_definition=single,
        const_dims={"V": "vocab_size"},
        var_dims={"B": "batch_size"},
        argument_names=(
            None,
            None,
            "top_k" if "top_k" in params else None,
            "top_p" if "top_p" in params else None,
        ),
        shared_rng=True,
    )


SAMPLING = (
    _sampler("top-k", ("top_k",)),
    _sampler("top-p", ("top_p",)),
    _sampler("top-k then top-p", ("top_k", "top_p")),
)
