"""The lesson "The rules your engine ships": the serving engines' keep-set rules (cascade_core/method/keep_sets.py)
placed on the paper's map at the Sandbox's eight tokens, in their own numbers (rejection_terms, dissect), beside the
paper's rule each resembles."""
from cascade_core import RULES
from cascade_core.method.costs import rejection_terms
from cascade_core.method.explain import dissect

from .sandbox import START
from .viz.format import number
from .viz.sandbox import output_tv

# where each sits on the paper's map, in words checked against the paper (Eq. 11, 14, 15; Lemma 3)
FAMILY = {
    "relaxed": "v2's accepted set (Eq. 14, alpha = delta) within the top 10; the rest to the argmax, not to eta p",
    "v2": "the paper's token rule with that set: the rest of q's mass to eta p (Eq. 11), verified by min(1, pi / q)",
    "typical": "a threshold on p(v), as v2 and v3 (Eq. 14, 15), its floor 0.3 exp(-H(p)); the rest to the argmax",
    "sglang": "keeps x with p(x) / t (lossy's test with q(x) read as 1); at t = 1 it emits p, as lossless",
    "lossless": "pi = p verified by min(1, p / q): rejects with TV(p, q) (Lemma 3, r = 1)",
}
ROWS = (("relaxed", 0.3), ("v2", 0.3), ("typical", 0.9), ("sglang", 0.0), ("lossless", 0.0))


def look_for_engines(rules):
    """Each rule's set A, P(rejected) and TV of its output to p at the Sandbox's START, then where each sits on the
    paper's map (a list under the table: a phone's width holds four numeric columns, not a fifth of sentences)."""
    labels, q, p = START
    lines, places = [], []
    for rule, alpha in ROWS:
        numbers = dissect(rule, q, p, alpha)
        kept = [t for t, defers in zip(labels, numbers["defers"]) if not defers]  # alpha >= a*: its set A
        name = f"{rule}{f' alpha {alpha:g}' if RULES[rule].alpha_used else ''}"
        rejection = number(rejection_terms(rule, q, p, alpha).total, 4)
        lines.append(f"| {name} | {', '.join(kept) or 'none'} | {rejection} | {number(output_tv(numbers), 4)} |")
        places.append(f"- **{rule}**: {FAMILY[rule]}.")
    return ("| rule | A: kept outright | P(rejected) | TV(output, p) |\n|---|---|---|---|\n" + "\n".join(lines) +
            "\n\nOn the paper's map:\n\n" + "\n".join(places) + "\n\nrelaxed keeps v2's set and pays for it: every "
            "other proposal is rejected, where v2 keeps some of them with min(1, eta p(v) / q(v)), and its output lies "
            "further from p. SGLang at its default and lossless both emit p (TV 0), at different rejection rates.")


def held_engines(rules):
    """Whether SGLang at alpha 0 rejects the draft's token at START more often than lossless (0), less often (1) or
    as often (2), by rejection_terms."""
    labels, q, p = START
    ours, lossless = rejection_terms("sglang", q, p, 0.0).total, rejection_terms("lossless", q, p, 0.0).total
    return 2 if abs(ours - lossless) <= 1e-12 else 0 if ours > lossless else 1
