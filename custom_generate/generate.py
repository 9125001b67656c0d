"""transformers ``custom_generate`` entry: speculative cascades inside ``model.generate``.

    target.generate(**inputs, assistant_model=draft, do_sample=True, alpha=0.25, deferral="v3",
                    custom_generate="<this repo>", trust_remote_code=True, max_new_tokens=320)

Extra arguments: ``alpha``, ``deferral`` (a rule from cascade_core.RULES, default v3), ``gamma`` (draft
block length; defaults to ``num_assistant_tokens`` or 4) and ``seed`` (defaults to a draw from torch's
global generator, so ``torch.manual_seed`` makes runs repeatable). Returns the token ids, prompt
included, like ``generate``; the rows of a batch (padding dropped by attention_mask) are generated as one batch of
the engine (32 rows at a time, a row starting as another finishes), each its solo run, and right-padded.
"""
import torch

try:
    from cascade_core import finish, stream_lanes
    from cascade_core.engine import one_run
    from cascade_core.models import make_pair
except ImportError as e:  # the hub copy of this file needs the engine installed beside transformers
    raise ImportError("custom_generate needs the cascade_core package: pip install the Speculative Cascades "
                      "Explorer repository (pip install <repo url or folder>)") from e


def _setting(name, kwargs, generation_config, model, default):
    for source in (kwargs, generation_config, model.generation_config):
        value = source.get(name) if isinstance(source, dict) else getattr(source, name, None)
        if value is not None:
            return value
    return default


def generate(model, inputs=None, generation_config=None, assistant_model=None, alpha=0.3, deferral="v3",
             gamma=None, seed=None, **kwargs):
    if assistant_model is None:
        raise ValueError("speculative cascades need a draft: pass assistant_model=")
    input_ids = inputs if inputs is not None else kwargs.get("input_ids")
    attention_mask = kwargs.get("attention_mask")
    do_sample = _setting("do_sample", kwargs, generation_config, model, False)
    temperature = float(_setting("temperature", kwargs, generation_config, model, 1.0)) if do_sample else 0.0
    max_new_tokens = int(_setting("max_new_tokens", kwargs, generation_config, model, 20))
    gamma = int(gamma or _setting("num_assistant_tokens", kwargs, generation_config, model, 4))
    if seed is None:
        seed = int(torch.randint(0, 2**31 - 1, ()))
    pair = make_pair("custom_generate", model, assistant_model, kwargs.get("tokenizer"))
    prompts = [(input_ids[b] if attention_mask is None else input_ids[b][attention_mask[b].bool()]).tolist()
               for b in range(input_ids.shape[0])]
    settings = dict(rule=deferral, alpha=alpha, temperature=temperature, seed=seed, max_new_tokens=max_new_tokens,
                    details=False)
    traces = finish(stream_lanes(pair, [one_run(dict(prompt_ids=ids, **settings)) for ids in prompts], gamma=gamma))
    for trace in traces:
        if trace.error:
            raise ValueError(trace.error)
    rows = [ids + trace.tokens for ids, trace in zip(prompts, traces)]
    pad = _setting("pad_token_id", kwargs, generation_config, model, None)
    pad = pad if pad is not None else min(pair.eos_token_ids, default=0)
    width = max(map(len, rows))
    return torch.tensor([row + [pad] * (width - len(row)) for row in rows], device=input_ids.device)
