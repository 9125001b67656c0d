"""The Trade-off tab: for the current prompt, the frontier the selected rules trace as alpha sweeps (the sweeps
package, with prefix sharing and progress); or a prompt set's frontier from a sweep's rows.jsonl. Its y axis is by
default the mean TV to the target (exact, from the trace); ROUGE-L and exact match where a prompt set has references
and answers; the target's NLL only as a diagnostic, drawn without a front (sweeps/figures.py)."""
import json

import gradio as gr

from cascade_core import RULES, mapped
from cascade_core.messages import shown
from sweeps.alphas import needs_pilot, parse_alphas
from sweeps.figures import QUALITY, frontier_figure
from sweeps.report import summarise
from sweeps.sweep import sweep_steps

from .controls import check_budget, draft_control, run_controls, run_defaults
from .explore_layout import NOT_OPENED, opened_in_explore
from .gpu import gpu
from .links import Linked, listed
from .options import GENERATING, INSTANT, example_prompts
from .pairs import drafts_with_a_head, pair_default_draft
from .settings import AppSettings
from .streaming import progress_messages, raises_for_client, read_or_stopped, warns_in_page
from .viz.format import markdown_text, plural
from .worker import ENGINE

RULE_CHOICES = [r for r in RULES if RULES[r].kind != "baseline"] + ["target"]
DEFAULT_RULES = ["lossless", "chow", "opt", "v3"]
DEFAULTS = dict(alphas="auto:6", **run_defaults())  # the page's, and its API's
DEFAULT_QUALITY = "tv_to_target"
QUALITY_CHOICES = [("mean TV to the target (0 = the target's distribution; exact, from the trace)", "tv_to_target"),
                   ("ROUGE-L (a prompt set with references)", "rouge_l"),
                   ("exact match (a prompt set with answers)", "exact_match"),
                   (QUALITY["target_nll"], "target_nll")]


def point_choices(rows):
    return [(f"{r['rule']}" + ("" if r["alpha"] is None else f" alpha {r['alpha']:g}"), i)
            for i, r in enumerate(summarise(rows))]


def progress_text(step):
    """A status line for a sweep's Progress."""
    if step.stage == "pilot":
        return f"Placing the alphas with a pilot run: {step.tokens} tokens…"
    running = ", ".join(trace.settings["rule"] + (f" alpha {trace.settings['alpha']:g}"
                                                  if RULES[trace.settings["rule"]].alpha_used else "")
                        for trace in step.traces)
    return f"{step.done} of {step.total} chains done; running side by side: {running} ({step.tokens} tokens)…"


def drawn_as_they_finish(x_axis, c, quality):
    """A sweep step's page update: the frontier of the chains finished so far, redrawn as each one finishes (the
    chart stayed empty for the whole sweep), and the status."""
    drawn = 0

    def update(step):
        nonlocal drawn
        if step.done == drawn or not step.rows:
            return gr.skip(), gr.skip(), gr.skip(), progress_text(step)
        drawn = step.done
        return gr.skip(), frontier_figure(summarise(step.rows), x_axis, quality, c), gr.skip(), progress_text(step)
    return update


def runs_asked(rules, alphas):
    """The runs a frontier makes at most: each rule's alphas (one run for a rule without alpha), and the pilot
    that places auto alphas."""
    per_rule = alphas[1] if alphas[0] == "auto" else len(alphas)
    runs = sum(per_rule if RULES[r].alpha_used else 1 for r in rules)
    return runs + needs_pilot(rules, alphas)


class TradeoffHandlers:
    def __init__(self, pairs, default_pair_spec, unread=lambda session_hash: 0):
        self.pairs, self.default_pair_spec, self.unread = pairs, default_pair_spec, unread
        self.default_draft = pair_default_draft(default_pair_spec)

    def settings(self, prompt, draft, rules, alphas, gamma, temperature, seed, max_new_tokens):
        """(run settings, distinct rules in their order, the tokens the call asks for), checked as Explore checks
        them (the first rule stands in for all), and the tokens against the request budget."""
        if not isinstance(rules, list) or not rules or not all(isinstance(r, str) for r in rules):
            raise ValueError(f"rules must be a list of rule names, at least one of {', '.join(RULE_CHOICES)}; "
                             f"got {shown(rules)}")
        rules = list(dict.fromkeys(rules))  # a rule named twice runs once
        unknown = next((r for r in rules if r not in RULE_CHOICES), None)
        if unknown is not None:
            raise ValueError(f"unknown rule {shown(unknown)} in rules; the frontier's rules are: "
                             f"{', '.join(RULE_CHOICES)}")
        s = AppSettings.from_inputs(prompt, self.default_pair_spec, True, "lossless", 0.0, gamma, temperature,
                                 max_new_tokens, seed, draft=draft)
        s = s.for_pair(self.pairs.get(s.pair_spec))  # a prompt too long for the context: refused before tokenizing
        tokens = check_budget(runs_asked(rules, parse_alphas(alphas)), s.max_new_tokens, "rules, alphas")
        return s, rules, tokens

    def frontier_steps(self, s, rules, alphas, share_prefix=True):
        """The sweep of one prompt, block by block (sweeps.sweep_steps): yields Progress, returns the rows."""
        item = dict(prompt=s.prompt, prompt_id="0", category=None, reference=None, answer=None)
        return sweep_steps(s.pair_spec, [item], rules, alphas, [s.seed], gamma=s.gamma, temperature=s.temperature,
                           max_new_tokens=s.max_new_tokens, share_prefix=share_prefix,
                           pair=self.pairs.get(s.pair_spec), batches=ENGINE.batches)

    @warns_in_page(lambda message: (gr.skip(), gr.skip(), gr.skip(), message))
    @gpu(lambda a: runs_asked(a["rules"], parse_alphas(a["alphas"])) * a["max_new_tokens"],
         lambda a: drafts_with_a_head(a["self"].default_pair_spec, a["draft"]))
    def run(self, prompt, draft, rules, alphas, gamma, temperature, seed, max_new_tokens, share_prefix, x_axis, c,
            quality=DEFAULT_QUALITY):
        """Outputs: rows state, figure, point chooser, status. Stop, or a closed page, ends the sweep after the
        block it is in."""
        s, rules, tokens = self.settings(prompt, draft, rules, alphas, gamma, temperature, seed, max_new_tokens)
        steps = ENGINE.iterate(self.frontier_steps(s, rules, alphas, bool(share_prefix)), tokens)
        rows = yield from mapped(steps, drawn_as_they_finish(x_axis, c, quality))
        figure = frontier_figure(summarise(rows), x_axis, quality, c)
        generated = sum(r["generated_tokens"] for r in rows)
        yield (rows, figure, gr.update(choices=point_choices(rows), value=None),
               f"Done: {len(rows)} runs, {sum(r['tokens'] for r in rows)} tokens in them, {generated} generated.")

    @staticmethod
    def redraw(rows, x_axis, c, quality=DEFAULT_QUALITY):
        return gr.skip() if not rows else frontier_figure(summarise(rows), x_axis, quality, c)

    @staticmethod
    def open_point(rows, index, prompt, draft, gamma, temperature, seed, max_new_tokens):
        if not rows or index is None:
            gr.Warning("Run the trade-off first, then choose one of its points.")
            return NOT_OPENED
        point = summarise(rows)[int(index)]
        return opened_in_explore(prompt, draft, point["rule"], point["alpha"] or 0.0, gamma, temperature,
                                 max_new_tokens, seed) + [gr.Tabs(selected="explore")]

    @staticmethod
    def upload(file, x_axis, c, quality=DEFAULT_QUALITY):
        """A sweep's rows.jsonl: the prompt set's frontier, means with 95% intervals."""
        if file is None:
            return gr.skip(), gr.skip(), ""
        try:
            rows = [json.loads(line) for line in open(file, encoding="utf-8") if line.strip()]
            unknown = next((i for i, r in enumerate(rows, 1) if not isinstance(r, dict) or r.get("rule") not in RULES),
                           None)
            if unknown is not None:
                raise ValueError(f"line {unknown} has no rule of this project's ({', '.join(RULES)}): "
                                 f"{shown(rows[unknown - 1])}")
            title = f"{len({r['prompt_id'] for r in rows})} prompts, {len(rows)} rows: means with 95% intervals"
            figure = frontier_figure(summarise(rows), x_axis, quality, c, title)
            return rows, figure, f"Loaded {plural(len(rows), 'row')}."
        # a 401-digit number (OverflowError) or JSON nested past Python's limit (RecursionError) included
        except (ValueError, KeyError, TypeError, OverflowError, RecursionError) as error:
            reason = markdown_text(f"{type(error).__name__}: {error}")
            return gr.skip(), gr.skip(), f"⚠️ not a sweep's rows.jsonl: {reason}"

    @raises_for_client
    def api_frontier(self, prompt: str, rules: list, alphas: str = DEFAULTS["alphas"], gamma: int = DEFAULTS["gamma"],
                     temperature: float = DEFAULTS["temperature"], max_new_tokens: int = DEFAULTS["max_new_tokens"],
                     seed: int = 0, draft: str = "", request: gr.Request = None) -> str:
        """For one prompt on the app's default pair with ``draft`` ("model", "head", or empty for the page's
        default), at the page's defaults. Its last value is one row per (rule, alpha), as sweeps.sweep
        makes them (JSON); before that it streams {"generating": {"stage": "pilot" or "chain", "chains_done": d,
        "chains": n, "running": r, "tokens": t (of the r runs going on)}} as /run does."""
        s, rules, tokens = self.settings(prompt, draft or self.default_draft, rules, alphas, gamma, temperature, seed,
                                         max_new_tokens)
        yield from read_or_stopped(self._frontier_messages(s, rules, alphas, tokens), self.unread, request)

    @gpu(lambda a: a["tokens"], lambda a: drafts_with_a_head(a["s"].pair_spec))
    def _frontier_messages(self, s, rules, alphas, tokens):
        def progress(step):
            return {"stage": step.stage, "chains_done": step.done, "chains": step.total,
                    "running": len(step.traces), "tokens": step.tokens}

        yield from progress_messages(self.frontier_steps(s, rules, alphas), tokens, progress, lambda rows: rows)


def read_rules(text):
    """A link's ``rules``: names from the tab's choices, separated by commas."""
    rules = listed(text, "rules")
    unknown = next((r for r in rules if r not in RULE_CHOICES), None)
    if not rules or unknown is not None:
        raise ValueError(f"rules must be names separated by commas from {', '.join(RULE_CHOICES)}, got {shown(text)}")
    return list(dict.fromkeys(rules))


def read_alphas(text):
    """A link's ``alphas``: 'auto:N' or numbers separated by commas, as the tab's box takes them."""
    parse_alphas(text)
    return text


def tradeoff_linked(draft):
    """What a link sets on this tab (its fields' defaults; ``draft``: the app's default draft)."""
    return Linked("tradeoff", dict(prompt=example_prompts()[0], draft=draft, rules=DEFAULT_RULES, **DEFAULTS),
                  "tradeoff-run",
                  parsers=dict(rules=read_rules, alphas=read_alphas))


def build_tradeoff(handlers, explore, tabs, values):
    """The tab, its fields at ``values``; returns them by name."""
    with gr.Row():
        with gr.Column(scale=1, min_width=320):
            prompt = gr.Textbox(label="Prompt", lines=2, value=values["prompt"], elem_id="tradeoff-prompt")
            draft = draft_control(values["draft"], "tradeoff-draft")
            rules = gr.CheckboxGroup(RULE_CHOICES, value=values["rules"], label="Rules", elem_id="tradeoff-rules")
            alphas = gr.Textbox(values["alphas"], label="alphas: auto:N (spread over deferral rates), or numbers",
                                elem_id="tradeoff-alphas")
            gamma, temperature, max_new_tokens, seed = run_controls(values)
            share = gr.Checkbox(True, label="prefix sharing (each alpha resumes where a decision first flips)")
            x_axis = gr.Radio([("target calls per token", "calls"),
                               ("speed-up over the target alone (measured calls)", "speedup"),
                               ("speed-up at a c set by you (hypothetical)", "at_c")],
                              value="calls", label="x axis", elem_id="tradeoff-x")
            c = gr.Slider(0.01, 1.0, value=0.25, step=0.01, elem_id="tradeoff-c",
                          label="c, set by you (for the hypothetical axis only: a draft call over a target call)")
            quality = gr.Radio(QUALITY_CHOICES, value=DEFAULT_QUALITY, label="y axis", elem_id="tradeoff-quality")
            run = gr.Button("Sweep alpha", variant="primary", elem_id="tradeoff-run")
            status = gr.Markdown("", elem_id="tradeoff-status")
            upload = gr.File(label="…or a sweep's rows.jsonl (a prompt set's frontier)", file_types=[".jsonl"],
                             elem_id="tradeoff-upload")
        with gr.Column(scale=2):
            plot = gr.Plot(label="Frontier", elem_id="tradeoff-plot")
            with gr.Row():
                point = gr.Dropdown([], label="A point of the frontier", elem_id="tradeoff-point")
                open_button = gr.Button("Open it in Explore", elem_id="tradeoff-open")
    rows = gr.State(None)
    run.click(handlers.run, [prompt, draft, rules, alphas, gamma, temperature, seed, max_new_tokens, share, x_axis, c,
                             quality], [rows, plot, point, status], **GENERATING)
    for control in (x_axis, c, quality):
        control.input(handlers.redraw, [rows, x_axis, c, quality], plot, **INSTANT)
    upload.upload(handlers.upload, [upload, x_axis, c, quality], [rows, plot, status], **INSTANT)
    opened = open_button.click(handlers.open_point, [rows, point, prompt, draft, gamma, temperature, seed,
                                                     max_new_tokens], explore.opened + [tabs], **INSTANT)
    explore.after_run(opened.then(
        explore.handlers.run, explore.settings, explore.view, **GENERATING))
    return dict(prompt=prompt, draft=draft, rules=rules, alphas=alphas, gamma=gamma, temperature=temperature, seed=seed,
                max_new_tokens=max_new_tokens)
