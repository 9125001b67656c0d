"""One block step by step (a replay from cascade_core/decoding/replay.py) as HTML: five stages, each press showing one
more, every number the engine's own. The stages follow docs/spec.md's "One block"; the keep test is the verification of
speculative sampling (Leviathan et al., 2023; the paper's Algorithm 4 with pi in place of p), the residual
norm(max(0, pi - q)) what a rejection samples from. A block gamma "auto"'s floor took (the target's own token, no
proposal) has three stages of its own: why nothing was proposed, the target's draw, what the caches keep."""
import html

from .format import number, plural, token_repr

STAGES = ("The draft proposes", "The target scores every proposal in one pass", "Each proposal's keep test",
          "The first rejection", "What both caches keep")
ALONE_STAGES = ("No proposal", "The target samples its own token", "What both caches keep")
DRAFTS = {"model": "draft model", "head": "EAGLE-3 head"}


GREEDY = (" At temperature 0, q and p are one-hot (all their mass on their top token), so every q(x), p(x) and keep "
          "probability here is 1 or 0: the test passes or fails for sure (at a temperature above 0 they are "
          "fractions).")


def stages(replay):
    """A replay's stages: a drafted block's, or those of a block the floor had the target take alone."""
    return ALONE_STAGES if replay is not None and replay["target_alone"] is not None else STAGES


def _token(replay, token, text):
    """A token as the step-through shows it: its literal text, or for one of the pair's special tokens (the replay's
    ``special`` ids, which the page adds: end of turn, end of text) a mark, as Explore shows it."""
    if token in replay.get("special", ()):
        return f'<code class="block-token special" title="a special token: {html.escape(token_repr(text))}">∎</code>'
    return f'<code class="block-token">{html.escape(token_repr(text))}</code>'


def keep_bar(keep, uniform, kept):
    """The keep probability as a bar, the position's uniform u as a mark on it: kept exactly when u falls inside."""
    verdict = "kept" if kept else "rejected"
    return (f'<span class="keep-bar {verdict}" title="keep probability {number(keep)}, u = {number(uniform)}">'
            f'<span class="keep-fill" style="width:{100 * keep:.1f}%"></span>'
            f'<span class="keep-mark" style="left:{100 * uniform:.1f}%"></span></span>'
            f'<span class="keep-words">u = {number(uniform)} {"<" if kept else "≥"} {number(keep)}: '
            f'<strong>{verdict}</strong></span>')


def proposal_rows(replay, step):
    """One table row per proposal: its token and q, then p, then pi and the keep test; greyed where discarded."""
    rows, checked = [], len(replay["positions"])
    for j, pos in enumerate(replay["positions"] + replay["discarded_detail"]):
        start = replay["start"] + j
        discarded = j >= checked and step >= 4
        cells = [f"x<sub>{j}</sub> (#{start})", _token(replay, pos["token"], pos["text"]), number(pos["q"])]
        cells.append(number(pos["p"]) if step >= 2 else "")
        if step >= 3:
            cells += [number(pos["pi"]), keep_bar(pos["keep_probability"], pos["uniform"], pos["kept"])] \
                if j < checked else ["", "not tested: it comes after the rejection"]
        row_class = ' class="discarded"' if discarded else ""
        rows.append(f"<tr{row_class}>" + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>")
    at = f" (T = {replay['settings']['temperature']:g})"  # the sampling distributions; the hover card's are T = 1's
    head = (["", "proposal", f"q(x){at}", f"p(x){at}" if step >= 2 else ""]
            + (["π(x)", "keep test"] if step >= 3 else []))
    return ('<table class="block-table"><tr>' + "".join(f"<th>{h}</th>" for h in head) + "</tr>" + "".join(rows) +
            "</table>")


def stage_text(replay, step):
    """What stage ``step`` (1 to 5) did, in the replay's own numbers."""
    n, checked = replay["caches"]["read"], len(replay["positions"])
    settings, correction = replay["settings"], replay["correction"]
    if step == 1:
        return (f"The {DRAFTS.get(replay['draft'], 'draft')} samples {n} proposals one after another, "
                f"x<sub>j</sub> from q<sub>j</sub> with its position's uniform "
                f"(temperature {settings['temperature']:g}): {n} draft calls.")
    if step == 2:
        read = "[last]" if n == 1 else f"[last, x<sub>0</sub> .. x<sub>{n - 2}</sub>]"
        return (f"One target call reads {read} and returns p<sub>j</sub> at all {n} positions at once, as if the "
                "proposals were already text.")
    if step == 3:
        keep = "min(1, p(x) / ((1 − α) q(x)))" if settings["rule"] == "lossy" else "min(1, π(x) / q(x))"
        return (f"π<sub>j</sub> = {html.escape(settings['rule'])}(q<sub>j</sub>, p<sub>j</sub>, α = "
                f"{number(settings['alpha'])}); in order, x<sub>j</sub> is kept with probability {keep}. The mark is "
                "the position's uniform u: kept exactly when it falls inside the bar." +
                (GREEDY if settings["temperature"] == 0 else ""))
    if step == 4:
        if correction is None:
            return f"Every proposal passed: the block emits all {n}, and no residual is sampled."
        tail = f" The {plural(n - checked, 'proposal')} after it are discarded unseen: each was drafted after a " \
            "token that is not in the text." if n > checked else ""
        return (f"x<sub>{checked - 1}</sub> was rejected, so the target's correction is sampled from the residual "
                f"norm(max(0, π − q)) with its uniform u = {number(replay['residual_uniform'])}: "
                f"{_token(replay, correction['token'], correction['text'])} (residual "
                f"{number(correction['residual'])}).{tail}")
    caches, last = replay["caches"], _token(replay, replay["emitted"][-1], replay["emitted_text"][-1])
    target = (f"The target's cache read {plural(caches['read'], 'slot')} for this block and keeps the "
              f"{caches['kept']} that lead to the emitted tokens ([last, x<sub>0</sub> .. x<sub>m−2</sub>], m = "
              f"{caches['kept']}), forgetting "
              f"{caches['forgotten']}.")
    draft = (" The draft model's cache keeps the same slots." if replay["draft"] == "model" else
             " The head keeps its first step's entry (it read the target's features) and reads the kept tokens again "
             "at the next block, paired with the target's features of this pass.")
    return f"{target}{draft} The next block starts from {last}, the block's last emitted token."


def residual_bars(replay):
    """The residual's top tokens as bars, the sampled correction marked; only tokens it gives mass (at temperature 0
    the target's top token alone), not the top-k's ties at 0."""
    correction = replay["correction"]
    if correction is None:
        return ""
    top = [t for t in replay["residual_top"] if t["probability"] > 0]  # the top-k's ties at 0 are not in it
    widest = max((t["probability"] for t in top), default=1.0)
    bars = "".join(
        f'<div class="residual-row{" chosen" if t["token"] == correction["token"] else ""}">'
        f'{_token(replay, t["token"], t["text"])}'
        f'<span class="residual-bar" style="width:{70 * t["probability"] / widest:.1f}%"></span>'
        f'<span>{number(t["probability"])}</span></div>' for t in top)
    return f'<div class="residual" aria-label="the residual\'s top tokens">{bars}</div>'


def bin_bar(alone):
    """The target's cumulative distribution as a bar, the token's bin [below, below + p) filled and the uniform u a
    mark on it: inverse-CDF sampling takes the token whose bin holds u."""
    below, upper, u = alone["below"], alone["below"] + alone["p"], alone["uniform"]
    return (f'<span class="keep-bar kept" title="its bin [{number(below)}, {number(upper)}), u = {number(u)}">'
            f'<span class="keep-fill" style="left:{100 * below:.1f}%;width:{100 * alone["p"]:.1f}%"></span>'
            f'<span class="keep-mark" style="left:{100 * u:.1f}%"></span></span>'
            f'<span class="keep-words">{number(below)} ≤ u = {number(u)} &lt; {number(upper)}: '
            "<strong>sampled</strong></span>")


def alone_rows(replay, step):
    """The floor's one row: no proposal, then (stage 2 on) the target's token, its p and the draw."""
    alone = replay["target_alone"]
    cells = [f"#{replay['start']}", "<em>no proposal</em>"]
    if step >= 2:
        cells = [f"#{replay['start']}", _token(replay, alone["token"], alone["text"]), number(alone["p"]),
                 bin_bar(alone)]
    head = ["", "target's token", "p(x)", "its bin in p's CDF"] if step >= 2 else ["", "proposal"]
    return ('<table class="block-table"><tr>' + "".join(f"<th>{h}</th>" for h in head) + "</tr><tr>" +
            "".join(f"<td>{cell}</td>" for cell in cells) + "</tr></table>")


def alone_text(replay, step):
    """What stage ``step`` (1 to 3) of a block the floor took did, in the replay's own numbers."""
    alone, settings = replay["target_alone"], replay["settings"]
    if step == 1:
        return (f"{html.escape(alone['reason'])} The draft proposed nothing: no "
                "draft call, no keep test, no residual.")
    if step == 2:
        return (f"One target call reads [last] and returns p (temperature {settings['temperature']:g}); the token is "
                f"sampled from p with the position's uniform u = {number(alone['uniform'])}: the token whose bin in "
                f"p's cumulative distribution holds u, {_token(replay, alone['token'], alone['text'])} (p = "
                f"{number(alone['p'])}).")
    draft = (" The draft model read nothing this block: it reads [last] with its next call." if replay["draft"] ==
             "model" else " The head read nothing this block: it reads [last] with its next call, paired with the "
             "target's features of it from this pass.")
    return (f"The target's cache read 1 slot ([last]) and keeps it, forgetting none.{draft} The next block starts "
            f"from {_token(replay, alone['token'], alone['text'])}.")


def block_html(replay=None, step=1, note=""):
    """Stages 1 to ``step`` of a replayed block (None: how to open one)."""
    if replay is None:
        words = html.escape(note) if note else ('Click a token, then "Step through its block" to watch the block '
                                                "that produced it, one stage a press.")
        return f'<div class="block-steps empty"><em>{words}</em></div>'

    names, alone = stages(replay), replay["target_alone"] is not None
    step = max(1, min(step, len(names)))
    emitted = " ".join(_token(replay, *token) for token in zip(replay["emitted"], replay["emitted_text"]))
    text = alone_text if alone else stage_text
    items = "".join(f'<li class="stage{" current" if i == step else ""}"><strong>{names[i - 1]}.</strong> '
                    f"{text(replay, i)}{residual_bars(replay) if i == 4 else ''}</li>" for i in range(1, step + 1))
    note = f'<p class="block-note">{html.escape(note)}</p>' if note else ""
    last = replay["start"] + len(replay["emitted"]) - 1
    where = f"token #{last}, the target's own" if alone else f"tokens #{replay['start']} to #{last}"
    rows = alone_rows(replay, step) if alone else proposal_rows(replay, step)
    return (f'<div class="block-steps" data-step="{step}"><p><strong>Block {replay["block"]}</strong> ({where}: '
            f"{emitted}) · stage {step} of {len(names)}</p>{note}{rows}<ol>{items}</ol></div>")
