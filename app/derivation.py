"""The derivation lesson: from a sequential cascade's deferral risk to opt, in the paper's steps (Narasimhan et al.,
ICLR 2025; equation, lemma and remark numbers are arXiv 2405.19261v2's): Eq. 3's constant price per deferral;
Lemma 1's rule (Eq. 4), whose plug-in is diff (Eq. 5), an oracle a sequential cascade cannot afford (Remarks 1-2);
Lemma 3, the price a speculative cascade pays instead, alpha TV; the per-position budget (Eq. 7), its Lagrangian
(Eq. 8) and Lemma 4's rule (Eq. 9); the plug-in opt (Eq. 10) and its regret (Lemma 5); and greedy decoding, where
opt's pi is diff's (Lemma 8, §C.3). Each step is a short text with its formula and an exercise the learner commits
to before its answer is revealed (tests/test_derivation.py computes every answer with cascade_core's rules); the
lesson's run then shows the steps' numbers at positions of that run (app/lesson_looks.py). The formulas are written
in this app's notation (q draft, p target, r the deferral, alpha the price, l_q and l_p the models' expected losses
under the true distribution P); the paper states them for a general loss."""
from dataclasses import dataclass

from .lessons import Answer

LATEX = [{"left": "$$", "right": "$$", "display": True}, {"left": "$", "right": "$", "display": False}]
# The exercises' example: a draft torn between two tokens and a target sure of the first; TV(p, q) = 0.4.
Q, P = (0.5, 0.5, 0.0), (0.8, 0.1, 0.1)
EXAMPLE = "q = ({}) and p = ({})".format(*(", ".join(f"{v:g}" for v in d) for d in (Q, P)))


@dataclass(frozen=True)
class Step:
    title: str
    text: str  # Markdown with LaTeX
    question: str
    answers: tuple  # Answers; the first is right
    why: str  # the right answer's reason, said when it is chosen


STEPS = (
    Step("The deferral risk of a sequential cascade (Eq. 3)",
         "A cascade answers each position with the draft or, where its rule $r$ defers ($r = 1$), with the target. "
         "Its risk at a position weighs each model's loss under the true next-token distribution $P$, and a "
         "sequential cascade, which calls the target only where it defers, pays a fixed price $\\alpha$ for every "
         "deferral:"
         "$$L_{\\text{def}}(r) = \\mathbb{E}_{v \\sim P}"
         "\\big[(1 - r)\\,\\ell(v, q) + r\\,(\\ell(v, p) + \\alpha)\\big],$$"
         "that is, $(1 - r)\\,\\ell_q + r\\,(\\ell_p + \\alpha)$, where $\\ell_q$ and $\\ell_p$ are the draft's "
         "and the target's expected losses there. Without the price, deferring would win wherever the target is the "
         "better model.",
         f"At the example position, {EXAMPLE}, say the draft's expected loss is ℓ_q = 0.5 and the target's "
         "ℓ_p = 0.2 (step 2 says where such numbers come from). At alpha = 0.1, what does the position add to "
         "L_def if the cascade defers there?",
         (Answer("0.3: ℓ_p + alpha, the target's loss and the price of calling it."),
          Answer("0.2: ℓ_p, the target's loss.",
                 "A deferral is not free: a sequential cascade calls the target only where it defers, and Eq. 3 "
                 "charges each call the price alpha."),
          Answer("0.24: ℓ_p + alpha TV(p, q) = 0.2 + 0.1 x 0.4.",
                 "That is what a speculative cascade pays (Lemma 3, Eq. 8), whose deferral costs only when a token "
                 "is rejected; a sequential cascade pays alpha for every deferral, however much the models agree.")),
         "Deferring (r = 1) leaves the term ℓ_p + alpha = 0.2 + 0.1 = 0.3; not deferring, ℓ_q = 0.5."),
    Step("Its best rule, and diff (Lemma 1, Eq. 4 and 5; Remarks 1-2)",
         "$L_{\\text{def}}$ is linear in $r$, so its minimiser decides each position alone, taking the smaller term "
         "(Lemma 1, Eq. 4):"
         "$$r^* = 1 \\iff \\ell_q > \\ell_p + \\alpha.$$"
         "The losses are expectations under the unknown $P$. With the 0-1 loss a model that answers its top token "
         "$v$ loses $1 - P(v)$; plugging in each model's own confidence, $\\ell_q \\approx 1 - \\max q$ and "
         "$\\ell_p \\approx 1 - \\max p$, gives diff (Eq. 5):"
         "$$\\text{defer} \\iff \\max q < \\max p - \\alpha.$$"
         "Diff reads $\\max p$ before it decides, so a sequential cascade would have to run the target at every "
         "position, the very cost deferring is meant to save: the paper calls diff an oracle there (Remark 1). A "
         "speculative cascade has $p$ at every position of a block from its one verification pass, so it can run "
         "diff as it stands (Remark 2).",
         f"A sequential cascade would decide by diff at the example position, {EXAMPLE}, at alpha = 0.1. What must "
         "it compute there, and does it defer?",
         (Answer("Both max q and max p, so a target call at the position; it defers: 0.5 < 0.8 - 0.1."),
          Answer("Only max q; it defers, since 0.5 < 1 - 0.1.",
                 "That is chow's test (Eq. 2), the plug-in of the risk with the draft alone (Lemma 6); diff compares "
                 "max q with max p - alpha, so it needs the target's distribution."),
          Answer("max p only where it defers; it defers: 0.5 < 0.8 - 0.1.",
                 "Whether to defer is decided by max p: the target must run at every position, deferred or not, "
                 "before the decision (Remark 1).")),
         "diff's a* = max p - max q = 0.3 exceeds alpha = 0.1 (Eq. 5), and max p is the target's: deciding by diff, "
         "a sequential cascade runs the target everywhere (Remark 1)."),
    Step("What a deferral costs in a speculative cascade (Lemma 3)",
         "A speculative cascade verifies each drafted token against $\\pi = (1 - r)\\,q + r\\,p$; the target has "
         "scored the position anyway, so a deferral costs only when the draft's token is then rejected, which ends "
         "the block. Verifying a draft token $x \\sim q$ against $p$ keeps it with probability "
         "$\\min(1, p(x)/q(x))$, so on average it is kept with probability $\\sum_v \\min(p(v), q(v)) = "
         "1 - TV(p, q)$ and rejected (Lemma 3) with probability"
         "$$\\sum_v \\max(0, \\pi(v) - q(v)) = r \\cdot TV(p, q).$$"
         "So Eq. 3's constant price $\\alpha$ becomes $\\alpha\\,TV(p, q)$: where the models agree, deferring "
         "costs nothing.",
         f"A position rule defers where {EXAMPLE}. How likely is the draft's token to be rejected there?",
         (Answer("0.4, which is TV(p, q)."),
          Answer("0.6.", "That is the probability it is kept, sum_v min(p(v), q(v)) = 1 - TV = 0.6."),
          Answer("0: the target checks a deferred token and keeps it.",
                 "Deferring means verifying against p: the token survives with probability min(1, p(x)/q(x)), "
                 "which is below 1 wherever q(x) > p(x) (here the second token: 0.1 / 0.5)."),
          Answer("1: deferring replaces the draft's token.",
                 "The target keeps the draft's token with probability min(1, p(x)/q(x)) and replaces it only when "
                 "the test rejects it.")),
         "TV(p, q) = sum_v max(0, p(v) - q(v)) = 0.3 + 0 + 0.1 = 0.4."),
    Step("The budget on rejections and the optimal rule (Eq. 7, Eq. 8, Lemma 4, Eq. 9)",
         "So minimise the expected loss under a budget $B$ on the rejection probability at each position (Eq. 7; "
         "the paper's objective is local to a position):"
         "$$\\min_r\\; (1 - r)\\,\\ell_q + r\\,\\ell_p \\quad\\text{subject to}\\quad r\\,TV(p, q) \\le B,$$"
         "or, with a multiplier $\\alpha \\ge 0$ pricing each rejection, its Lagrangian form (Eq. 8), Eq. 3 with "
         "$\\alpha\\,TV(p, q)$ in place of $\\alpha$:"
         "$$L_{\\text{spec}}(r) = (1 - r)\\,\\ell_q + r\\,\\big(\\ell_p + \\alpha\\,TV(p, q)\\big).$$"
         "It is linear in $r$ again, so the optimal rule takes the smaller term (Lemma 4, Eq. 9):"
         "$$r^* = 1 \\iff \\ell_q - \\ell_p > \\alpha\\,TV(p, q).$$"
         "A better target is not enough: its advantage must pay for the rejections it risks.",
         "The draft's expected loss exceeds the target's, ℓ_q - ℓ_p = 0.2, at a position where TV(p, q) = 0.4. Does "
         "the rule defer at alpha = 0.6?",
         (Answer("No: 0.2 is below alpha TV = 0.24."),
          Answer("Yes: the target is the better model there.",
                 "A better target is not enough: deferring costs alpha TV = 0.6 x 0.4 = 0.24 in risked rejections, "
                 "more than the 0.2 it gains."),
          Answer("Yes: 0.2 exceeds TV - alpha.",
                 "The price of a rejection multiplies its probability: alpha TV, not TV - alpha.")),
         "0.2 < 0.6 x 0.4 = 0.24: the gain does not pay for the risked rejections."),
    Step("The plug-in: opt (Eq. 10), and its regret (Lemma 5)",
         "Plugging the 0-1 loss's estimates of step 2 into Lemma 4's rule, $\\ell_q \\approx 1 - \\max q$ and "
         "$\\ell_p \\approx 1 - \\max p$, gives opt (Eq. 10):"
         "$$\\text{defer} \\iff \\max p - \\max q > \\alpha\\,TV(p, q),$$"
         "that is, it defers iff $\\alpha < a^*$ with $$a^* = \\frac{\\max p - \\max q}{TV(p, q)}.$$"
         "It is an estimate of Lemma 4's rule, not the rule itself: it trusts each model's confidence. With the "
         "0-1 loss, what it gives up against the optimal rule, $L_{\\text{spec}}(\\hat r_{\\text{opt}}) - "
         "\\min_r L_{\\text{spec}}(r)$, is at most how far each model is from the true distribution (Lemma 5): "
         "$\\max_v |P(v) - q(v)| + \\max_v |P(v) - p(v)|$. So opt is only as good as the models are calibrated: "
         "the paper's own explanation of why opt does less well on Gemma than on T5 (on GSM8K clearly worse at low "
         "rejection rates): with a 2B draft and a 27B target, the target's probabilities are the better confidence "
         "signal for both models, the signal the token rule v3 uses.",
         f"For {EXAMPLE}, for which alphas does opt defer?",
         (Answer("alpha < 0.75."),
          Answer("alpha < 0.3.", "That is diff's a* = max p - max q; opt divides the gap by TV = 0.4."),
          Answer("alpha > 0.75.", "Every rule defers iff alpha < a*: a larger alpha prices rejections higher and "
                                  "defers less.")),
         "a* = (0.8 - 0.5) / 0.4 = 0.75, and opt defers iff alpha < a*."),
    Step("Greedy decoding (Lemma 8)",
         "At temperature 0 both sampling distributions are one-hot on their top tokens, so $TV(p, q)$, taken on "
         "them, is 1 where the tops differ and 0 where they agree, while $\\max q$ and $\\max p$ stay the "
         "temperature-1 confidences the rules threshold (Lemma 8's proof). Where the tops differ, opt's test is "
         "$\\max p - \\max q > \\alpha$: diff's (Eq. 5). Where they agree, opt defers wherever $\\max p > \\max q$, "
         "but $\\pi = p = q$ whatever either rule decides. So opt's $\\pi$ is diff's at every position and they "
         "emit the same tokens (Lemma 8: under greedy decoding the optimal speculative and sequential deferrals "
         "coincide), yet their deferral counts can differ.",
         "At temperature 0, at a position where both models' top token is the first, with temperature-1 "
         "q = (0.6, 0.3, 0.1) and p = (0.65, 0.25, 0.1), which of diff and opt defer at alpha = 0.1?",
         (Answer("opt alone; pi = p = q whichever rule decides, so the token is the same."),
          Answer("Neither: at temperature 0 opt is diff (Lemma 8), and 0.05 < 0.1.",
                 "Lemma 8 makes their pi the same, not their decisions: where the tops agree, TV = 0, opt's price "
                 "alpha TV vanishes and it defers wherever max p > max q."),
          Answer("Both: the target is surer.",
                 "diff defers only where the gap max p - max q exceeds alpha (Eq. 5): 0.05 < 0.1.")),
         "Where the one-hot distributions agree, TV = 0, so opt defers since max p - max q = 0.05 > 0 (a* = +inf); "
         "diff's a* = 0.05 is below alpha = 0.1. Both verify against the same one-hot distribution."),
)


def check(step, choice):
    """The reveal of an exercise: right (and why) or what the chosen answer misses."""
    if choice is None:
        return "*Pick an answer first.*"
    answers = STEPS[step].answers
    chosen = next(answer for answer in answers if answer.text == choice)
    if chosen is answers[0]:
        return f"**Right.** {STEPS[step].why}"
    return f"**Not quite.** {chosen.wrong_because} The answer: *{answers[0].text}* {STEPS[step].why}"


def step_markdown(k, step):
    return f"#### {k}. {step.title}\n{step.text}"


def shown_answers(k, step):
    """The exercise's answers in the order shown: rotated by the step, so that the right one is not always first."""
    texts = [answer.text for answer in step.answers]
    return texts[k % len(texts):] + texts[:k % len(texts)]
