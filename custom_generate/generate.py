"""transformers ``custom_generate`` entry: speculative cascades inside ``model.generate``.

    target.generate(**inputs, assistant_model=draft, do_sample=True, alpha=0.25, deferral="v3",
                    custom_generate="<a Hub repo or folder with this file>", trust_remote_code=True,
                    max_new_tokens=320)

or, with an EAGLE-3 head (a draft that reads the target's hidden states) instead of a draft model:

    target.generate(**inputs, draft_head="AngelSlim/Qwen3-1.7B_eagle3", do_sample=True, alpha=0.25, deferral="v3",
                    custom_generate=..., trust_remote_code=True, max_new_tokens=320)

Extra arguments: ``draft_head`` (a Hub id or folder of an EAGLE-3 head for the target, in place of
``assistant_model``), ``alpha``, ``deferral`` (a rule of the engine, default v3), ``gamma`` (draft block length;
defaults to ``num_assistant_tokens`` as passed, or 4), ``seed`` (defaults to a draw from torch's global
generator, so ``torch.manual_seed`` makes runs repeatable) and ``precision`` (the Linear layers' weights on the CPU:
"fp32", the models as passed, by default; "bf16", "int8", "int8-fp32", or "auto" (bf16 where timed faster on this
machine, else fp32): the target and the draft are converted in place and stay so; see precision.py). Everything
else is read the way ``generate`` reads it, by ``generate`` itself: the lengths (``max_new_tokens``,
``max_length``, ``min_new_tokens``, ``min_length``), ``eos_token_id``, ``pad_token_id``, ``stopping_criteria`` and
``stop_strings``, ``streamer`` (the prompt, then every token as its block is verified) and
``return_dict_in_generate``. A batch keeps its layout (left padding included: ``output[:, input_ids.shape[1]:]``
are the new tokens, finished rows padded with ``pad_token_id``) and runs as one batch of the engine, each row its
solo run. What the cascade cannot do (beam search, several sequences per prompt, per-step scores, logits
processors) is refused naming the argument.
"""
import functools
import warnings

import torch
from transformers.generation import (EosTokenCriteria, GenerateDecoderOnlyOutput, GenerationMixin,
                                     MaxLengthCriteria, StoppingCriteriaList, StopStringCriteria)

from cascade_core.decoding.generation import finish, mapped, one_run, solo, stream_lanes
from cascade_core.formats.eagle3_head import load_head
from cascade_core.formats.pair import make_pair
from cascade_core.formats.precision import AUTO, apply_precision, check_precision
from cascade_core.speed.kernels import verdicts_path

# Settings that reshape p and q before sampling. The cascade samples from temperature-scaled p and q only, so
# these are refused when a call sets them, and named in a warning when the model's generation config does.
RESHAPING = ("top_k", "top_p", "min_p", "typical_p", "top_h", "epsilon_cutoff", "eta_cutoff", "repetition_penalty",
             "encoder_repetition_penalty", "no_repeat_ngram_size", "encoder_no_repeat_ngram_size", "bad_words_ids",
             "sequence_bias", "suppress_tokens", "begin_suppress_tokens", "forced_bos_token_id", "forced_eos_token_id",
             "exponential_decay_length_penalty", "guidance_scale", "watermarking_config")
# Other ways to decode, and outputs the cascade has no single model's numbers for.
OTHER_MODES = {"num_beams": 1, "num_beam_groups": 1, "num_return_sequences": 1, "penalty_alpha": None,
               "dola_layers": None, "output_scores": False, "output_logits": False, "output_attentions": False,
               "output_hidden_states": False}
# The engine stops at end-of-text and at the length itself; other criteria are asked after every token.
NATIVE_STOPS = (MaxLengthCriteria, EosTokenCriteria)


def generate(model, inputs=None, generation_config=None, logits_processor=None, stopping_criteria=None,
             prefix_allowed_tokens_fn=None, synced_gpus=None, assistant_model=None, streamer=None,
             negative_prompt_ids=None, negative_prompt_attention_mask=None, alpha=0.3, deferral="v3", gamma=None,
             seed=None, draft_head=None, precision="fp32", **kwargs):
    """``model.generate`` with a speculative cascade: checks what the cascade cannot honour, then lets
    transformers' own ``generate`` prepare every setting and call ``cascade`` to decode."""
    check_precision(precision)
    if assistant_model is None and draft_head is None:
        raise ValueError("assistant_model: speculative cascades need a draft; pass assistant_model=<a draft model> "
                         "or draft_head=<an EAGLE-3 head's Hub id or folder>")
    if assistant_model is not None and draft_head is not None:
        raise ValueError("draft_head: the cascade has one draft; pass assistant_model=<a draft model> or "
                         "draft_head=<an EAGLE-3 head>, not both")
    passed = {**(generation_config.to_diff_dict() if generation_config is not None else {}), **kwargs}
    reshaping = "not applied by speculative cascades, which sample from temperature-scaled p and q; leave it unset"
    refused = {**{name: (passed.get(name), reshaping) for name in RESHAPING},
               "logits_processor": (logits_processor or None, reshaping),
               "prefix_allowed_tokens_fn": (prefix_allowed_tokens_fn, reshaping),
               "negative_prompt_ids": (negative_prompt_ids, reshaping),
               "negative_prompt_attention_mask": (negative_prompt_attention_mask, reshaping),
               "assistant_tokenizer": (kwargs.get("assistant_tokenizer"), "the draft must share the target's "
                                       "tokenizer: the rules compare q and p token by token"),
               "inputs_embeds": (kwargs.get("inputs_embeds"), "the cascade needs token ids; pass input_ids"),
               "synced_gpus": (synced_gpus or None, "not supported by speculative cascades")}
    for name, (value, why) in refused.items():
        if value is not None:
            raise ValueError(f"{name}: {why}")
    ignored = [f"{name}={getattr(model.generation_config, name)!r}" for name in RESHAPING
               if getattr(model.generation_config, name, None) is not None]
    if ignored:
        warnings.warn(f"speculative cascades sample from temperature-scaled p and q: the model's generation config "
                      f"sets {', '.join(ignored)}, which is not applied", stacklevel=2)
    tokenizer, stop_strings = kwargs.pop("tokenizer", None), kwargs.pop("stop_strings", None)
    stopping_criteria = StoppingCriteriaList(stopping_criteria or [])
    if stop_strings is not None:
        if tokenizer is None:
            raise ValueError("stop_strings: needs the tokenizer; pass tokenizer=<the target's tokenizer> as well")
        stopping_criteria.append(StopStringCriteria(tokenizer, stop_strings))
    rows = inputs if inputs is not None else kwargs.get("input_ids")
    if streamer is not None and rows is not None and rows.dim() == 2 and rows.shape[0] > 1:
        raise ValueError(f"streamer: streams one row, as transformers' streamers do; got a batch of {rows.shape[0]}")
    draft = assistant_model if draft_head is None else head_for(model, draft_head)
    pair = make_pair("custom_generate", model, draft, tokenizer)
    apply_precision(pair, precision, verdicts_path() if precision == AUTO and model.device.type == "cpu" else None)
    decode = functools.partial(cascade, pair=pair, streamer=streamer, alpha=alpha, deferral=deferral,
                               gamma=gamma if gamma is not None else passed.get("num_assistant_tokens", 4), seed=seed)
    return GenerationMixin.generate(model, inputs, generation_config, stopping_criteria=stopping_criteria,
                                    streamer=streamer, custom_generate=decode, **kwargs)


def head_for(model, draft_head):
    """The EAGLE-3 head ``draft_head`` names (a Hub id or folder), over ``model``, or a ValueError naming it."""
    try:
        return load_head(draft_head, model)
    except (OSError, ValueError, KeyError) as error:
        raise ValueError(f"draft_head: could not load {draft_head!r} as an EAGLE-3 head for this model: "
                         f"{' '.join(str(error).split())}") from None


def cascade(model, input_ids, logits_processor, stopping_criteria, generation_config, *, pair, streamer, alpha,
            deferral, gamma, seed, **model_kwargs):
    """The decoding step ``generate`` calls once it has prepared the inputs (``input_ids`` as given, padding
    included), the lengths, the special tokens and the stopping criteria."""
    config = generation_config
    for name, allowed in OTHER_MODES.items():
        if getattr(config, name, allowed) not in (allowed, None):
            raise ValueError(f"{name}={getattr(config, name)!r}: not supported by speculative cascades (one "
                             f"sequence per prompt, no per-step scores); use {name}={allowed!r}")
    batch, width = input_ids.shape
    mask = model_kwargs.get("attention_mask")
    mask = torch.ones_like(input_ids) if mask is None else mask
    prompts = [input_ids[b][mask[b].bool()].tolist() for b in range(batch)]
    eos = config.eos_token_id
    eos = [] if eos is None else [eos] if isinstance(eos, int) else list(eos)
    pad = config.pad_token_id if config.pad_token_id is not None else (eos[0] if eos else 0)
    max_new_tokens = config.max_length - width  # generate counts max_length over the padded input, as here
    min_new_tokens = min(max_new_tokens, max(0, (config.min_length or 0) - width, config.min_new_tokens or 0))
    temperature = float(config.temperature or 1.0) if config.do_sample else 0.0
    settings = dict(rule=deferral, alpha=alpha, temperature=temperature, details=False,
                    seed=seed if seed is not None else int(torch.randint(0, 2**31 - 1, ())),
                    eos_token_ids=eos, max_new_tokens=max_new_tokens, min_new_tokens=min_new_tokens)
    extra = StoppingCriteriaList([c for c in stopping_criteria if not isinstance(c, NATIVE_STOPS)])
    rows = [dict(prompt_ids=ids, stop=stop_rule(extra, input_ids[b]) if extra else None, **settings)
            for b, ids in enumerate(prompts)]
    steps = stream_lanes(pair, [one_run(row) for row in rows], gamma=gamma)
    if streamer is None:
        traces = finish(steps)
    else:
        traces = finish(mapped(steps, streaming(streamer)))
        streamer.end()
    traces = [solo(trace) for trace in traces]
    longest = max(len(trace.tokens) for trace in traces)
    sequences = torch.full((batch, width + longest), pad, dtype=input_ids.dtype, device=input_ids.device)
    sequences[:, :width] = input_ids
    for b, trace in enumerate(traces):
        sequences[b, width: width + len(trace.tokens)] = torch.tensor(trace.tokens, dtype=input_ids.dtype)
    return GenerateDecoderOnlyOutput(sequences=sequences) if config.return_dict_in_generate else sequences


def streaming(streamer):
    """For the running traces after each block (one row: a streamer streams one): put each new token."""
    sent = 0

    def put(running):
        nonlocal sent
        for trace in running:  # the one row, while it runs
            for token in trace.tokens[sent:]:
                streamer.put(torch.tensor([token]))
            sent = len(trace.tokens)

    return put


def stop_rule(criteria, row):
    """The engine's stop predicate for one row: transformers' stopping criteria on the row as generate would
    hold it (its input, padding included, then the generated tokens). scores is None: no single model's
    scores stand behind a cascade's token."""
    prefix = row.tolist()

    def stop(generated):
        return bool(criteria(torch.tensor([prefix + generated], device=row.device), None)[0])

    return stop
