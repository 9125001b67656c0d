"""The derivation lesson: from the deferral risk to opt, in the paper's steps (Narasimhan et al., ICLR 2025: Eq. 3,
Lemma 3, Eq. 7 and 8, Lemma 4's rule, Eq. 9, its plug-in, Eq. 10, and Lemma 8), each a short text with its
formula and an exercise the learner commits to before its answer is revealed; the lesson's run then shows the
steps' numbers at positions of that run (app/lesson_looks.py). The formulas are written in this app's notation
(q draft, p target, r the deferral, alpha the price of a rejection); the paper states them for a general loss."""
from dataclasses import dataclass

from .lessons import Answer

LATEX = [{"left": "$$", "right": "$$", "display": True}, {"left": "$", "right": "$", "display": False}]
# The exercises' example: a draft torn between two tokens and a target sure of the first; TV(p, q) = 0.4.
Q, P = (0.5, 0.5, 0.0), (0.8, 0.1, 0.1)


@dataclass(frozen=True)
class Step:
    title: str
    text: str  # Markdown with LaTeX
    question: str = ""
    answers: tuple = ()  # Answers; the first is right
    why: str = ""  # the right answer's reason, said when it is chosen


STEPS = (
    Step("The deferral risk (Eq. 3)",
         "A cascade answers each position with the draft or, where its rule $r$ defers ($r = 1$), with the target. "
         "Its risk charges every position the expected loss of the model that answers it:"
         "$$R(r) = \\mathbb{E}\\big[(1 - r)\\,\\ell_q + r\\,\\ell_p\\big]$$"
         "where $\\ell_q$ and $\\ell_p$ are the draft's and the target's expected losses there. Deferring always "
         "lowers the risk where the target is better; what stops a cascade from deferring everywhere is its cost."),
    Step("What a deferral costs in a speculative cascade (Lemma 3)",
         "In a speculative cascade the target has scored the position anyway; a deferral costs only when the draft's "
         "token is then rejected, which ends the block. Verifying a draft token $x \\sim q$ against $p$ keeps it with "
         "probability $\\min(1, p(x)/q(x))$, so on average it is kept with probability $\\sum_v \\min(p(v), q(v)) = "
         "1 - TV(p, q)$ and rejected with probability $$r \\cdot TV(p, q).$$",
         "A position rule defers where q = (0.5, 0.5, 0) and p = (0.8, 0.1, 0.1). How likely is the draft's token to be "
         "rejected there?",
         (Answer("0.4, which is TV(p, q)."),
          Answer("0.6.", "That is the probability it is kept, sum_v min(p(v), q(v)) = 1 - TV = 0.6."),
          Answer("0: the target checks a deferred token and keeps it.",
                 "Deferring means verifying against p: the token survives with probability min(1, p(x)/q(x)), "
                 "which is below 1 wherever q(x) > p(x) (here the second token: 0.1 / 0.5)."),
          Answer("1: deferring replaces the draft's token.",
                 "The target keeps the draft's token with probability min(1, p(x)/q(x)) and replaces it only when "
                 "the test rejects it.")),
         "TV(p, q) = sum_v max(0, p(v) - q(v)) = 0.3 + 0 + 0.1 = 0.4."),
    Step("A budget on rejections (Eq. 7) and its Lagrangian (Eq. 8)",
         "So minimise the risk under a budget $B$ on the rejections:"
         "$$\\min_r R(r) \\quad\\text{subject to}\\quad \\mathbb{E}\\big[r\\,TV(p, q)\\big] \\le B,$$"
         "or, with a multiplier $\\alpha \\ge 0$ pricing each rejection,"
         "$$\\mathcal{L}(r) = \\mathbb{E}\\big[(1 - r)\\,\\ell_q + r\\,(\\ell_p + \\alpha\\,TV(p, q))\\big] - "
         "\\alpha B.$$"),
    Step("The optimal rule (Lemma 4, Eq. 9)",
         "The Lagrangian is minimised position by position: defer where deferring's term is the smaller,"
         "$$r^* = 1 \\iff \\ell_q - \\ell_p > \\alpha\\,TV(p, q).$$"
         "A better target is not enough: its advantage must pay for the rejections it risks.",
         "The draft's expected loss exceeds the target's by 0.2 at a position where TV(p, q) = 0.4. Does the rule "
         "defer at alpha = 0.6?",
         (Answer("No: 0.2 is below alpha TV = 0.24."),
          Answer("Yes: the target is the better model there.",
                 "A better target is not enough: deferring costs alpha TV = 0.6 x 0.4 = 0.24 in risked rejections, "
                 "more than the 0.2 it gains."),
          Answer("Yes: 0.2 exceeds TV - alpha.",
                 "The price of a rejection multiplies its probability: alpha TV, not TV - alpha.")),
         "0.2 < 0.6 x 0.4 = 0.24: the gain does not pay for the risked rejections."),
    Step("The plug-in: opt (Eq. 10)",
         "The losses $\\ell_q, \\ell_p$ are expectations under the unknown true distribution $P$. With the 0-1 loss "
         "a model that answers its top token $v$ loses $1 - P(v)$; plugging in each model's own distribution for "
         "$P$, $\\ell_q \\approx 1 - \\max q$ and $\\ell_p \\approx 1 - \\max p$, gives opt:"
         "$$\\text{defer} \\iff \\max p - \\max q > \\alpha\\,TV(p, q),$$"
         "that is, it defers iff $\\alpha < a^*$ with $$a^* = \\frac{\\max p - \\max q}{TV(p, q)}.$$"
         "It is an estimate of Lemma 4's rule, not the rule itself: it trusts each model's confidence.",
         "For q = (0.5, 0.5, 0) and p = (0.8, 0.1, 0.1), for which alphas does opt defer?",
         (Answer("alpha < 0.75."),
          Answer("alpha < 0.3.", "That is diff's a* = max p - max q; opt divides the gap by TV = 0.4."),
          Answer("alpha > 0.75.", "Every rule defers iff alpha < a*: a larger alpha prices rejections higher and "
                                  "defers less.")),
         "a* = (0.8 - 0.5) / 0.4 = 0.75, and opt defers iff alpha < a*."),
    Step("Greedy decoding (Lemma 8)",
         "At temperature 0 both sampling distributions are one-hot on their top tokens, so $TV(p, q)$ is 0 where the "
         "tops agree (and deferring changes nothing: $\\pi = p = q$) and 1 where they differ. There opt defers iff "
         "$\\max p - \\max q > \\alpha$: diff's rule (Eq. 5).",
         "At temperature 0, at a position where the two models' top tokens differ, what is TV(p, q)?",
         (Answer("1."),
          Answer("max p - max q.", "TV is taken on the sampling distributions, one-hot at temperature 0; max p and "
                                   "max q are the temperature-1 confidences the rule thresholds."),
          Answer("0.", "TV is 0 only where the one-hot distributions put their mass on the same token.")),
         "Two one-hot distributions on different tokens share no mass: TV = 1."),
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
    turn = k % len(texts) if texts else 0
    return texts[turn:] + texts[:turn]
