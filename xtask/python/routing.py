"""Routing checks shared by make_fixtures.py and random_checkpoints.py (both run from this folder,
so a plain `import routing` finds it)."""

import torch


def routers(model):
    """The MoE routers: `...mlp.gate` / `...block_sparse_moe.gate` (GraniteMoe's
    `...block_sparse_moe.router`, GPT-OSS's `...mlp.router`) modules with a `top_k`, whose
    forward returns (router_logits, scores, indices); Llama 4's `...feed_forward.router`, whose
    returns (scores, router_logits); Gemma 4's `...router` (`Gemma4TextRouter`, its k in the
    config), which returns (probabilities, weights, indices)."""
    suffixes = (".mlp.gate", ".block_sparse_moe.gate", ".block_sparse_moe.router", ".mlp.router", ".feed_forward.router")
    return [
        m
        for n, m in model.named_modules()
        if (n.endswith(suffixes) and hasattr(m, "top_k")) or type(m).__name__ == "Gemma4TextRouter"
    ]


def top_k(router):
    """How many experts `router` picks per token."""
    if type(router).__name__ == "Gemma4TextRouter":
        return router.config.top_k_experts
    return router.top_k


def router_gap(model, inputs):
    """The smallest gap between the k-th and (k+1)-th routing probability over every position
    (padded ones too) of `inputs` in every sparse layer, or None when every router picks all its
    experts (a near tie could route differently in another runtime's arithmetic)."""
    gaps = []

    def hook(module, args, out):
        correction = getattr(module, "e_score_correction_bias", None)
        statics = getattr(module, "moe_statics", None)
        if type(module).__name__ == "Llama4Router":  # Llama 4 chooses by the logits themselves
            probs = out[1].float()
        elif type(module).__name__ == "Gemma4TextRouter":  # Gemma 4 returns its probabilities
            probs = out[0].float()
        elif correction is not None:  # DeepSeek-V3 and GLM-4.5 choose by sigmoid + correction
            probs = torch.sigmoid(out[0].float()) + correction.float()
        elif statics is not None:  # ERNIE 4.5 chooses by softmax + correction
            probs = torch.softmax(out[0].float(), dim=-1) + statics.e_score_correction_bias.float().squeeze()
        else:
            probs = torch.softmax(out[0].float(), dim=-1)
        k = top_k(module)
        if k < probs.shape[-1]:
            top = probs.topk(k + 1, dim=-1).values
            gaps.append((top[:, -2] - top[:, -1]).min().item())

    handles = [r.register_forward_hook(hook) for r in routers(model)]
    try:
        with torch.no_grad():
            for ids, mask in inputs:
                model(input_ids=ids, attention_mask=mask)
    finally:
        for h in handles:
            h.remove()
    return min(gaps) if gaps else None
