"""What "Use via API" (the page's foot) and gradio_client's view_api say about each endpoint, in a caller's words:
the endpoint's description, one line per field with what it means and the values it takes, and the result.

Gradio 6 builds each field's entry, and the Python, JavaScript and curl snippets, from the field's Api component
(gr.api makes one per parameter of the endpoint's function): its label names it (gr.api's is "1st", "2nd", ...),
its JSON schema's "additional_description" is the line shown after Gradio's own sentence, a required field's
example is what the snippet sends for it (Api's is the string "...", which the Python snippet writes as Ellipsis),
and the schema's Python type decides whether a default is quoted: a string under ``int | str`` is written bare
(gamma=auto), under ``Literal['auto'] | int`` quoted. ``register`` adds an endpoint with gr.api and sets these;
tests/test_api_docs.py reads them back from the running app's /gradio_api/info, the text the page shows."""
import inspect

import gradio as gr
from gradio.context import get_blocks_context

from cascade_core import RULES
from cascade_core.decoding.run_settings import AUTO, MAX_GAMMA, MAX_SEED, MAX_TEMPERATURE, MIN_TEMPERATURE
from sweeps.alphas import MAX_AUTO

from .api_calls import api_parameters
from .compare import FIRST, MAX_ROWS, PRESETS
from .controls import APP_MAX_NEW_TOKENS, REQUEST_TOKEN_BUDGET
from .options import example_prompts
from .recent_runs import RECENT_RUNS
from .sandbox import START
from .strategies import CASCADE_RULES
from .tradeoff import DEFAULT_RULES, RULE_CHOICES


def names(rules):
    return ", ".join(rules)


def alpha_ranges():
    """Each rule's alpha range, rules of one range together: 'chow, v3 [0, 1]; ...; lossless ... ignore it'."""
    ranges = {}
    for name, rule in RULES.items():
        if rule.alpha_used:
            ranges.setdefault(rule.range_text(), []).append(name)
    ignored = [name for name, rule in RULES.items() if not rule.alpha_used]
    return "; ".join(f"{names(rules)} {text}" for text, rules in ranges.items()) + f"; {names(ignored)} ignore it"


GAMMA = f"draft tokens per block: a whole number from 1 to {MAX_GAMMA}"
DRAFT = '"model" (the draft model), "head" (the EAGLE-3 head) or "" for the page\'s default draft'
# One line per field: what it means and the values it takes (an endpoint's own where it differs: ENDPOINT_FIELDS).
FIELDS = dict(
    prompt="the text the models continue, as a chat message: not empty, and short enough for the pair's context "
           "to hold it with max_new_tokens more",
    rule=f"the deferral rule, one of {names(RULES)}",
    alpha=f"the rule's alpha (a deferral threshold; lossy's lenience, the ensemble's weight on the target), in its "
          f"rule's range: {alpha_ranges()}",
    gamma=f'{GAMMA}, or "{AUTO}" for the cost model\'s pick at each block',
    temperature=f"both models' sampling temperature: 0 (greedy) or a number from {MIN_TEMPERATURE:g} to "
                f"{MAX_TEMPERATURE:g}",
    max_new_tokens=f"tokens to generate per run: a whole number from 1 to {APP_MAX_NEW_TOKENS} (a call's runs "
                   f"together at most {REQUEST_TOKEN_BUDGET})",
    seed=f"the seed of the run's random numbers (the same seed, the same run): a whole number from 0 to "
         f"2^{MAX_SEED.bit_length()} - 1",
    draft=DRAFT,
    reproducible="whether to decode alone: true gives the run bitwise as made by itself; false decodes it beside "
                 "other calls' rows, the near-ties that can part the two marked in the trace",
    block="the block of the run to replay, counted from 0: at most the run's last (a block past it is refused)",
    rows=f'1 to {MAX_ROWS} rows, each {{"rule": a rule as /run takes it, "alpha": a number in its rule\'s range, 0 if '
         "left out}, no two of them the same run",
    rules=f"the rules to sweep, one or more of {names(RULE_CHOICES)}",
    alphas=f'the alphas each rule runs at: "auto:N" (N from 1 to {MAX_AUTO}, placed so that their deferral rates '
           "spread from 0 to 1), or numbers separated by commas",
    q="the draft's distribution: 2 to 64 non-negative weights, normalised here, as many as p's",
    p="the target's distribution: 2 to 64 non-negative weights, normalised here, as many as q's",
    threshold="the sequential cascade's threshold, a number from 0 to 1: the target answers again when the draft's "
              "mean max q over its answer is below it",
)
ENDPOINT_FIELDS = {
    "compare": dict(gamma=GAMMA, draft=f'{DRAFT}, or "each" to run every row with each draft in turn'),
    "frontier": dict(gamma=GAMMA),
    "strategies": dict(rule=f"the speculative cascade's deferral rule, one of {names(CASCADE_RULES)}"),
}
# What a snippet sends for a required field: the page's own starting values.
EXAMPLES = dict(prompt=example_prompts()[0], rows=[dict(rule=rule, alpha=alpha) for rule, alpha in PRESETS[FIRST]],
                rules=DEFAULT_RULES, q=START[1], p=START[2])
GAMMA_OR_AUTO = {"anyOf": [{"enum": [AUTO]}, {"type": "integer"}]}  # quoted "auto" in every snippet

PROGRESS = "Streams progress about twice a second as JSON text"
# Each endpoint: its description, then its result's one line.
ENDPOINTS = {
    "run": (
        "One run of the cascade on the app's model pair, as Explore makes it. " + PROGRESS + ', {"generating": '
        '{"tokens": n, "max_new_tokens": m}}, then the run: its prompt, settings, tokens and text, per position the '
        "draft's proposal, both models' probabilities, the rule's decision and who emitted the token, and the "
        "run's stats.",
        "JSON text: progress, then the run"),
    "block": (
        "One block of a /run run replayed step by step with the engine's own numbers, as Explore's \"Step through "
        "its block\" shows it: send /run's values and the block's number. After a /run with the same values (one "
        f"of the last {RECENT_RUNS}) it replays that run's block alone; else it decodes the run up to the block. "
        + PROGRESS + " as /run does, then the block: the draft's proposals with each keep test, the correction "
        "drawn from the residual and the discarded tail.",
        "JSON text: progress, then the block"),
    "compare": (
        "Several (rule, alpha) rows on one prompt and the same random numbers, as Compare runs them. " + PROGRESS
        + ', {"generating": {"rows", "finished", "tokens", "max_new_tokens"}}, then a list with /run\'s result for '
        'each row and draft, its "draft" added; a row its draft cannot run (a draft-only row beside an EAGLE-3 '
        'head) is {"rule", "alpha", "draft", "skipped": the sentence why}.',
        "JSON text: progress, then one result per row and draft"),
    "frontier": (
        "The Trade-off's sweep of one prompt: every rule at each of its alphas, on the same random numbers. "
        + PROGRESS + ', {"generating": {"stage": "pilot" or "chain", "chains_done", "chains", "running", "tokens"}}, '
        "then one row per (rule, alpha): its text, deferral and acceptance rates, calls, speed-up over the target "
        "alone and distance to the target's distribution.",
        "JSON text: progress, then one row per rule and alpha"),
    "sandbox": (
        "One decision of a rule over a small vocabulary whose q and p you give, as the Sandbox shows it (no model "
        "runs): pi, accept_prob, residual (zeros where no rejection can happen), a_star and defers per token, tv, "
        "rejection_prob, and output, the probability that the verified token is each token.",
        "JSON text: the decision's numbers"),
    "strategies": (
        "The target alone and four ways to spend the draft and the target on one prompt (cascade, speculative "
        "decoding, speculative cascade, sequential cascade), each timed call by call on the engine's own clock, as "
        'Strategies shows them. ' + PROGRESS + ', {"generating": {"strategy", "tokens"}}, then per strategy its '
        'name, calls ([role, start, end] in seconds), text and totals ("speedup": over the target alone); one the '
        'draft cannot run alone (beside an EAGLE-3 head) has totals null and "skipped", the sentence why.',
        "JSON text: progress, then one lane per strategy"),
}


def register(fn, api_name, **kwargs):
    """gr.api(fn) as endpoint ``api_name`` (gr.api's keyword arguments in ``kwargs``), described as above."""
    description, result = ENDPOINTS[api_name]
    dependency = gr.api(fn, api_name=api_name, api_description=description, **kwargs)
    blocks = get_blocks_context().blocks
    fields = {**FIELDS, **ENDPOINT_FIELDS.get(api_name, {})}
    for block_id, (name, default) in zip(dependency["inputs"], api_parameters(fn), strict=True):
        field = blocks[block_id]
        describe(field, name, "additional_description", fields[name], GAMMA_OR_AUTO if default == AUTO else None)
        if default is inspect.Parameter.empty:
            field.example_payload = lambda example=EXAMPLES[name]: example
    for block_id in dependency["outputs"]:
        describe(blocks[block_id], "result", "description", result)  # a result's line is its schema's description
    return dependency


def describe(component, label, key, text, schema=None):
    """An Api component's label and its line under ``key`` of its JSON schema (``schema``: one in place of
    gr.api's, where that would misquote the default)."""
    component.label = label
    component._api_info = {**(schema or component.api_info()), key: sentence(text)}


def sentence(text):
    """A line as the sentence it is on the page, after Gradio's own ('The input value that is provided in ...')."""
    return text[0].upper() + text[1:] + ("" if text.endswith(".") else ".")
