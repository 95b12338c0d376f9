"""A logits processor that makes a model write chosen tokens, so a test can drive a real
trainer's ``generate`` with scripted replies while the model still computes every logit."""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def forced_tokens(scripts: Mapping[int, Sequence[int]], start: int, eos_token_id: int):
    """A ``LogitsProcessor`` keeping, for each batch row in ``scripts``, only its script's next
    token (``start``: the prompt length), then EOS; other rows are left free."""
    import torch
    from transformers import LogitsProcessor

    class ForcedTokens(LogitsProcessor):
        def __call__(self, input_ids, scores):
            step = input_ids.shape[1] - start
            for row, script in scripts.items():
                token = script[step] if step < len(script) else eos_token_id
                keep = scores[row, token].clone()
                scores[row] = -torch.inf
                scores[row, token] = keep
            return scores

    return ForcedTokens()
