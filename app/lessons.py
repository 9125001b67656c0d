"""The lessons of the Learn tab, as data: what each teaches, the question it asks before its run, the answers a
learner can commit to (each wrong one with the misconception it reflects), what it runs and how its run is read
(app/lesson_looks.py). The tab itself: app/learn.py."""
from dataclasses import dataclass
from typing import Callable

from cascade_core import RULES
from cascade_core.decoding.strategies import REPEATS

from .lesson_looks import (held_chow, held_derivation, held_frontier, held_sandbox, held_speculative, held_timed,
                           held_tv, held_why, look_for_chow, look_for_derivation, look_for_frontier, look_for_sandbox,
                           look_for_speculative, look_for_timed, look_for_tv, look_for_why, start_table, timed_doubt,
                           why_doubt)
from .engine_lesson import held_engines, look_for_engines
from .options import example_prompts


@dataclass(frozen=True)
class Answer:
    """An answer a learner can commit to before the run; ``wrong_because``: the misconception it reflects, said when
    the run does not bear it out; ``caveat``: said when it holds by this run's chance rather than in general."""

    text: str
    wrong_because: str = ""
    caveat: str = ""


@dataclass(frozen=True)
class Lesson:
    title: str
    short: str  # the walkthrough's step label
    idea: str  # what the lesson teaches (Markdown)
    predict: str  # the question to answer before moving a control
    kind: str  # "rows" (side by side), "timed" (one after another), "sandbox", "frontier"
    rows: tuple = ()  # (rule, alpha) for "rows", (rule, alpha, draft) for "timed", the rules for "frontier"
    temperature: float = 0.7
    max_new_tokens: int = 48
    opens: tuple = ()  # the tab the lesson talks about, and its rule and alpha there, as (name, value) pairs
    # What to look for, from the run's results: (pair, traces) for "rows", (each run's pair, per repeat the runs'
    # traces) for "timed" (strategies.REPEATS of them, each on the engine's own clock),
    # the rules' (rule, alpha) for "sandbox", the sweep's rows for "frontier"
    look: Callable = None
    steps_through: bool = False  # after its run, one block of its last row can be opened and stepped through
    decision_map: bool = False  # its run draws its last row's decision map, with its first row's boundary beside
    answers: tuple = ()  # the Answers to its question, one of which the learner commits to before the run
    held: Callable = None  # from the run's results (as ``look`` takes them): the index of the answer that held
    derivation: bool = False  # the derivation's steps and exercises (app/derivation.py) come before its question
    # the answer that holds is a property of the rule (``held`` reads its formula, not the run's numbers): the reveal
    # says what the rule says, not what this run shows
    rule_property: bool = False
    # from the run's results: the sentence a timed verdict carries where its repeats disagree ('' where they agree)
    doubt: Callable = None

    def reveal(self, choice, *results):
        """Whether the committed answer (its text) held in this run, and if not, what did and why the answer fails."""
        outcome = self.answers[self.held(*results)]
        chosen = next(answer for answer in self.answers if answer.text == choice)
        doubt = self.doubt(*results) if self.doubt else ""
        if chosen is outcome:
            return f"**Your answer:** {choice} **It held.** {' '.join(filter(None, (chosen.caveat, doubt)))}".rstrip()
        shows = "The rule says" if self.rule_property else "What this run shows"
        return (f"**Your answer:** {choice} **It did not hold.** {shows}: *{outcome.text}* "
                f"{' '.join(filter(None, (chosen.wrong_because, doubt)))}").rstrip()

    def link(self):
        """The query that opens the lesson's tab in its state: its run's prompt, seed and lengths too (a tab takes
        the fields it has controls for), and run=1 where the tab has a Run."""
        params = dict(prompt=example_prompts()[0], gamma=4, seed=0, temperature=self.temperature,
                      max_new_tokens=self.max_new_tokens, **dict(self.opens))
        return {name: str(value) for name, value in dict(params, run=int(params["tab"] != "sandbox")).items()}

    @property
    def tokens(self):
        """The tokens a run of this lesson may generate (a frontier: its rules x 3 alphas, and a pilot)."""
        runs = {"frontier": len(self.rows) * 3 + 1, "timed": len(self.rows) * REPEATS}.get(self.kind, len(self.rows))
        return runs * self.max_new_tokens


def introduction(k, lesson):
    return f"### {k}. {lesson.title}\n{lesson.idea}"


LESSONS = (
    Lesson("Why speculative cascades", "Why",
           "A **cascade** lets the draft answer where it is sure and calls the target only where its rule defers: it "
           "trades quality for cost, but sequentially, the target reading one deferred token at a time after the "
           "draft has decided. **Speculative decoding** drafts a block and lets the target score all of it in one "
           "pass, keeping the tokens that pass a test against p: fast and lossless (its output is distributed "
           "exactly as the target's), so it cannot trade quality for speed (lossy speculative decoding can: the "
           "table lists it). A **speculative cascade** runs a cascade's deferral rule inside that one-pass "
           "verification (Algorithm 4): each draft token is verified against pi, which is p or q for a position "
           "rule (p where it defers) and q(v)(1 - r(v)) + eta p(v) for a token rule (Eq. 11), so it keeps the "
           "cascade's trade-off at speculative decoding's pace.\n\n"
           "The paper's headline (Narasimhan et al., ICLR 2025; T5 small -> large on WMT, T = 1, gamma = 5), the "
           "speed-up over the large model at the large model's quality:\n\n"
           "| rule | speed-up |\n|---|---|\n| opt | 1.95x |\n| v3 | 1.85x |\n| diff | 1.79x |\n"
           "| lossy speculative decoding | 1.61x |\n| BiLD* | 1.34x |\n\n"
           "v3 gave the best quality at the large model's latency in every T5 column. This lesson times the three "
           "kinds of decoding on this machine, one after another, three times over, on the engine's own clock (its "
           "model calls and its work, not the page's redraw).",
           "On this machine, which will write its 48 tokens first: the target alone, speculative decoding "
           "(lossless), or the speculative cascade (v3, alpha 0.5)?",
           "timed", (("target", 0.0), ("lossless", 0.0), ("v3", 0.5)), look=look_for_why, held=held_why,
           doubt=why_doubt,
           opens=(("tab", "strategies"), ("rule", "v3"), ("alpha", 0.5)), answers=(
               Answer("The speculative cascade.", caveat=(
                   "Not by construction: v3's blocks need not run longer than lossless's (a token rule can reject "
                   "more often, lesson 6); the acceptance column below shows whose did here.")),
               Answer("Speculative decoding (lossless).",
                      "Lossless is not the fastest by construction. Where v3 keeps a token (its set A), pi(v) >= q(v) "
                      "and the proposal always passes; a token outside A passes only with probability "
                      "min(1, eta p(v) / q(v)), less often than under lossless's min(1, p(v) / q(v)) (Eq. 11). "
                      "Whether v3's blocks run longer depends on where the draft puts its mass (the acceptance "
                      "column below says whose did here), and on this CPU a verification of several tokens costs "
                      "more than one target token, which can put the target alone first."),
               Answer("The target alone.",
                      "One target call scores a whole block: with a draft cheap beside its target, the tokens kept "
                      "per call outweigh the draft's calls.",
                      "On this 2-core CPU it can: the small target is compute-bound, and a verification of several "
                      "tokens costs more than one (docs/benchmarks.md)."))),
    Lesson("Speculative decoding", "Speculative decoding",
           "The draft proposes a block of tokens; the target scores the whole block in one pass and checks the "
           "proposals in order (rule `lossless`: pi = p), keeping each with probability min(1, p(x) / q(x)). At the "
           "first rejection it writes a token sampled from the residual norm(max(0, p - q)) instead, and that ends "
           "the block: every later proposal is discarded unseen. Kept tokens cost no target call of their own. "
           "After the run, click a token and step through the block that wrote it, one stage a press, with the "
           "engine's own numbers (at this temperature 0 every q(x), p(x) and keep probability is 1 or 0; Explore "
           "at a temperature above 0 shows the test's fractions).",
           "At temperature 0, will the lossless row write a different text from the target alone? How many target "
           "calls will it need for the same tokens?",
           "rows", (("target", 0.0), ("lossless", 0.0)), temperature=0.0, look=look_for_speculative,
           opens=(("tab", "explore"), ("rule", "lossless")), steps_through=True, held=held_speculative, answers=(
               Answer("The same text, in fewer target calls."),
               Answer("A different text from the target alone's.",
                      "Lossless verifies every proposal against pi = p, and at temperature 0 p is one-hot on the "
                      "target's top token: a proposal is kept only where it is that token, and a rejected one is "
                      "replaced by it, so the text is the target's (up to a near tie: see below).",
                      "Not because the draft's tokens got in: every token is the target's top token in the pass that "
                      "read it, and a near tie between two of them went the other way (see below)."),
               Answer("The same text, in as many target calls.",
                      "One target call scores a whole block of proposals at once: every kept proposal is a token the "
                      "target needed no call of its own for."))),
    Lesson("A cascade by confidence: chow", "Chow",
           "A cascade lets the draft answer where it is sure. Chow's rule defers to the target when the draft's "
           f"top probability is low, `{RULES['chow'].defers_when}`. Where it does not defer, pi = q: the target "
           "still scores the position in the block's pass, and the verification keeps the draft's token with "
           "probability pi(x) / q(x) = 1, so only deferred positions can be replaced.",
           "Which alpha lets the draft speak most often, and what does that do to the target's calls and to how "
           "likely the target finds the text?",
           "rows", (("chow", 0.3), ("chow", 0.6), ("chow", 0.9)), look=look_for_chow,
           opens=(("tab", "explore"), ("rule", "chow"), ("alpha", 0.6)), held=held_chow, answers=(
               Answer("alpha 0.9."),
               Answer("alpha 0.3.",
                      "chow defers where max q < 1 - alpha (Eq. 2): a smaller alpha raises the bar the draft's "
                      "confidence must clear, so more positions defer. Every rule defers iff alpha < a*: a larger "
                      "alpha defers less."),
               Answer("Every alpha equally often.",
                      "alpha is the threshold itself: moving it moves positions across it, so how many defer "
                      "changes with it."))),
    Lesson("Asking the target: diff and opt", "diff and opt",
           "In a speculative cascade the target has scored every position anyway, so a rule may read p. `diff` "
           f"defers when `{RULES['diff'].defers_when}`; `opt` when `{RULES['opt'].defers_when}`, the paper's "
           "plug-in estimate (Eq. 10) of the optimal rule of Lemma 4 (Eq. 9): it weighs the target's extra "
           "confidence, max p - max q, against alpha times how much the two models disagree, TV(p, q).",
           "At two positions with the same confidence gap max p - max q > 0, where is opt more likely to defer: the "
           "one where the models agree (small TV) or the one where they disagree?",
           "rows", (("diff", 0.1), ("opt", 0.2)), look=look_for_tv,
           opens=(("tab", "explore"), ("rule", "opt"), ("alpha", 0.2)), decision_map=True, held=held_tv,
           rule_property=True, answers=(
               Answer("Where they agree (small TV)."),
               Answer("Where they disagree (large TV).",
                      "Disagreement is what opt prices, not what it seeks: where a position rule defers, pi = p and "
                      "the draft's token is rejected with probability TV (Lemma 3), so at the same confidence gap a "
                      "larger TV makes deferring cost more, and opt defers only where max p - max q exceeds alpha TV "
                      "(Eq. 10)."),
               Answer("Neither: only the confidence gap counts.",
                      "That is diff (Eq. 5). opt subtracts alpha TV(p, q) from the target's extra confidence "
                      "(Eq. 10), so TV tilts its boundary: the decision map's rising line."))),
    Lesson("From the risk to opt: the derivation", "Derivation",
           "Where does opt's test come from? Six steps, from the constant price a sequential cascade pays per deferral "
           "(Eq. 3) through the price a speculative cascade pays instead (Lemma 3) to the rule opt runs (Eq. 10) and "
           "what greedy decoding makes of it (Lemma 8), each with an exercise: commit to an answer, then check it. "
           "Then run opt and see the steps' numbers at positions of the run, and every position placed on the "
           "decision map.",
           "Run opt (alpha 0.3) and place each position at (TV, max p - max q). Which positions will it defer?",
           "rows", (("opt", 0.3),), look=look_for_derivation, held=held_derivation, decision_map=True,
           derivation=True, opens=(("tab", "explore"), ("rule", "opt"), ("alpha", 0.3)), answers=(
               Answer("Those above the line max p - max q = alpha TV."),
               Answer("Those where the target is surer, max p > max q.",
                      "That is the rule at alpha = 0: the price of the rejections a deferral risks, alpha TV, is "
                      "missing (Eq. 9)."),
               Answer("Those where the models disagree most (TV above a half).",
                      "TV is the price of a deferral, not its reason: at one confidence gap a larger TV makes "
                      "deferring cost more (Lemma 3), so opt defers less there."))),
    Lesson("Token rules: v1, v2, v3 and the accepted set", "Token rules",
           "Token rules decide per token v: they keep an accepted set A of tokens (r(v) = 0) and move the rest of "
           "q's mass onto p, pi(v) = q(v)(1 - r(v)) + eta p(v) with eta = sum_v r(v) q(v) (Eq. 11). On A, "
           "pi(v) >= q(v), so a proposal from A is verified and kept with probability 1; a proposal outside A, with "
           "min(1, eta p(v) / q(v)). So the draft's token is rejected with probability sum_v max(0, pi(v) - q(v)) = "
           "eta sum_{v in A} p(v) + sum_{v not in A} max(0, eta p(v) - q(v)), which is not Lemma 3's r TV(p, q): "
           "that holds for a position rule, whose pi is q or p. Lossless (pi = p) rejects with probability TV. "
           f"v1 defers v when `{RULES['v1'].defers_when}` (it reads the draft's own q(v)), v2 when "
           f"`{RULES['v2'].defers_when}`, v3 when `{RULES['v3'].defers_when}` (they read the target's p(v)). Eight "
           "tokens, their q and p set in the Sandbox:\n\n" + start_table(),
           "At these q and p, which rejects the draft's token more often: v3 at alpha 0.5, or lossless speculative "
           "decoding?",
           # alphas at which each rule's accepted set is a part of the eight (v1 and v2 keep all eight at 0.5)
           "sandbox", (("v1", 0.1), ("v2", 0.1), ("v3", 0.5)), look=look_for_sandbox,
           opens=(("tab", "sandbox"), ("rule", "v3"), ("alpha", 0.5)), held=held_sandbox, answers=(
               Answer("v3 at alpha 0.5.", caveat=(
                   "At these q and p, not always: where the draft's mass sits mostly on A, whose proposals all pass, "
                   "v3 can reject less often than lossless.")),
               Answer("Lossless.",
                      "A token rule keeps more of the draft's tokens, so it always rejects less: not so. Every "
                      "proposal from A passes, but one outside A passes only with probability "
                      "min(1, eta p(v) / q(v)) <= min(1, p(v) / q(v)), lossless's, so v3 can reject more often than "
                      "lossless's TV (Eq. 11's pi put into Lemma 3's sum)."),
               Answer("Equally often: a deferral costs TV.",
                      "That is Lemma 3, for a position rule, whose pi is q or p, so its rejection probability is "
                      "r TV(p, q). A token rule's pi mixes q and p token by token (Eq. 11), and its rejection "
                      "probability is eta sum_{v in A} p(v) + sum_{v not in A} max(0, eta p(v) - q(v))."))),
    Lesson("The trade-off", "Trade-off",
           "Each alpha is one point: target calls per token (cost) against the **mean TV to the target**. The "
           "verification makes each emitted token follow its position's pi exactly (Algorithm 4), so TV(pi, p), the "
           "total-variation distance from pi to the target's own p there, says how far that position's output lies "
           "from the target's distribution; averaged over the text it is exact, read from the trace, with no judge. "
           "Lossless is 0 (pi = p). A position rule's pi is q where it keeps the draft's distribution and p where it "
           "defers (Eq. 6), so each position counts TV(q, p) or 0, and a smaller alpha defers at more positions, "
           "each of which then counts 0 and may be rejected (Lemma 3); a token rule's pi mixes both (Eq. 11). It is "
           "a distance from the target, not a quality score: the paper measures quality with task metrics (BLEU, "
           "ROUGE-2/L, exact match, pass@1, F1) against measured latency (T5) or rejection rate (Gemma), reporting "
           "both the speed-up at the large model's quality and the best quality at its latency, and there its token "
           "rule often scores above the large model itself (Fig. 3), which no distance from the target can show. "
           "The tab's target NLL is a diagnostic only: it rewards mode-seeking text, so greedy text can score below "
           "the target's own samples, and a lower NLL is not better text. One prompt and 24 tokens, as here, cannot "
           "rank the rules.",
           "With at most 80% of lossless's target calls per token, which rule's point lies nearest the target's "
           "distribution (the lowest mean TV to the target)?",
           "frontier", ("lossless", "chow", "opt", "v3"), max_new_tokens=24, look=look_for_frontier,
           opens=(("tab", "tradeoff"),), held=held_frontier, answers=(
               Answer("chow's.",
                      "chow decides on the draft's confidence alone (Eq. 2), not on how far q lies from p, so "
                      "nothing steers the positions where it keeps q toward a small TV(q, p).",
                      "One prompt and 24 tokens: another prompt or seed moves every point (docs/sweeps.md averages "
                      "prompt sets)."),
               Answer("opt's.",
                      "At the same confidence gap, opt (alpha > 0) keeps q more readily where TV(q, p) is large "
                      "(Eq. 10), where deferring risks a rejection (Lemma 3): it weighs target calls, and each such "
                      "position counts that large TV.",
                      "One prompt and 24 tokens: another prompt or seed moves every point (docs/sweeps.md averages "
                      "prompt sets)."),
               Answer("v3's.",
                      "v3's pi keeps q only on the target's top tokens and gives the rest of q's mass to p (Eq. 15, "
                      "Eq. 11); whether that lies nearer p than another rule's point at the same cost depends on the "
                      "prompt, and one prompt and 24 tokens move every point.",
                      "One prompt and 24 tokens: another prompt or seed moves every point (docs/sweeps.md averages "
                      "prompt sets)."),
               Answer("None: no point calls the target that little.",
                      "Here at least one point called the target at most 80% as often as lossless."))),
    Lesson("When it pays: c, gamma, the draft and the measured speed-up", "When it pays",
           "The app's block drafts gamma + 1 proposals (gamma + 1 draft calls), scores all of them in one target "
           "pass (one target call) and verifies them in order, with no bonus token: the paper's Algorithm 4 drafts "
           "gamma and, when all pass, draws a bonus token from pi at the next position, which needs q there, so "
           "here that position is a proposal like the others (docs/spec.md). A run's counters show it: one target "
           "call per block, gamma + 1 draft calls per block (fewer in the last blocks, cut short by the token "
           "limit). It pays when the "
           "tokens a target call yields outweigh the draft's cost, c = (one draft call) / (one target call), "
           "measured here on this machine. Two drafts are timed: a draft model, which runs its own layers and "
           "scores the whole vocabulary, and an EAGLE-3 head, one decoder layer that reads three of the target's "
           "hidden states (already computed by the target's last pass) and scores a draft vocabulary of the tokens "
           "the target writes most. The head's call is cheap: one layer and a small vocabulary. Its q is zero "
           "outside that vocabulary, so such a token is never proposed: where pi wants it, it comes from the "
           "residual (the Sandbox shows a q with zeros).",
           "On this machine, will the cascade finish 48 tokens before the target alone, and with which draft?",
           "timed", (("target", 0.0, "model"), ("v3", 0.5, "model"), ("v3", 0.5, "head")), look=look_for_timed,
           opens=(("tab", "strategies"), ("rule", "v3"), ("alpha", 0.5)), held=held_timed, doubt=timed_doubt,
           answers=(
               Answer("Yes, with either draft.",
                      "A cascade is not faster by construction: it pays only where a draft call is cheap beside a "
                      "target call (c) and enough proposals are kept, and the draft model runs all of its layers over "
                      "the whole vocabulary."),
               Answer("Yes, with the EAGLE-3 head only.",
                      "The head's call is cheap (one layer, a small vocabulary), but speed also needs its proposals "
                      "kept: see the acceptance column."),
               Answer("Yes, with the draft model only.",
                      "A draft model's call runs all of its layers and scores the whole vocabulary; the head's is one "
                      "layer over the target's hidden states, so its c is the smaller (see the table)."),
               Answer("No: neither finishes first.",
                      "A block costs one target call for up to gamma + 1 tokens: with a draft cheap beside its target "
                      "and proposals kept often, the calls saved outweigh the draft's."))),
    Lesson("The rules your engine ships", "Engines' rules",
           "Serving engines ship lossy acceptance of their own, and none of it verifies against a pi with "
           "min(1, pi / q) (Algorithm 4). Each keeps the draft's token x with a probability a(x) read off the target "
           "alone and, on a rejection, emits a replacement: **SGLang** (speculative_accept_threshold_single / _acc = "
           "t) keeps x if p(x) >= t, else with p(x) / t, and replaces it from p without x; **TensorRT-LLM's relaxed "
           "acceptance** keeps x if it is among the target's top 10 with p(x) >= max p - delta, else emits the "
           "target's argmax; **Medusa's typical acceptance** keeps x if p(x) > min(epsilon, 0.3 exp(-H(p))), else "
           "the argmax. Here each is a rule of the same exact engine (alpha = 1 - t, delta, 1 - epsilon: larger "
           "keeps more). On the paper's map, relaxed keeps v2's accepted set (Eq. 14 with alpha = delta) within the "
           "top 10, but where v2 moves the rest of q's mass onto eta p and verifies it (Eq. 11), relaxed rejects "
           "every other proposal; typical thresholds p(v) as v2 and v3 do (Eq. 14, 15), at a floor set by p's "
           "entropy. The output of neither is a paper rule's pi. The Sandbox shows each one's keep probability a(v) "
           "and output at the eight tokens:\n\n" + start_table(),
           "SGLang at its default threshold (t = 1, alpha 0 here) emits exactly the target's distribution, as "
           "lossless speculative decoding does. At these q and p, which rejects the draft's token more often?",
           "sandbox", (("relaxed", 0.3), ("typical", 0.9), ("sglang", 0.0)), look=look_for_engines,
           opens=(("tab", "sandbox"), ("rule", "sglang"), ("alpha", 0.0)), held=held_engines, rule_property=True,
           answers=(
               Answer("SGLang."),
               Answer("Lossless.",
                      "SGLang's test never reads q: it keeps x with p(x), and p(x) <= min(1, p(x) / q(x)), lossless's "
                      "keep probability, for every x, so it never rejects less than lossless's TV(p, q) (Lemma 3 "
                      "with r = 1)."),
               Answer("Equally often: the same output costs the same.",
                      "The same output distribution can cost more: lossless's min(1, p / q) rejects with TV(p, q); "
                      "SGLang's p(x) with 1 - sum_x q(x) p(x), which is never smaller, since min(q(v), p(v)) >= "
                      "q(v) p(v) (equal, for one, where the draft is sure of one token; here it is larger)."))),
)
