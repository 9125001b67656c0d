"""The Learn tab's panel "What the paper found": Narasimhan et al.'s results (arXiv 2405.19261, v2's table, figure,
equation and lemma numbers), each with whether this app reproduces it on its bundled pair and how, or why not. The
content is data, so that tests/test_findings.py can check every number against the paper's digest and pin the
sentences about this app that a run can check; the tab that places it: app/learn.py."""
from dataclasses import dataclass

import gradio as gr

STATUSES = ("reproduced", "partly reproduced", "not reproduced")


@dataclass(frozen=True)
class Finding:
    title: str
    source: str  # where in the paper: its table or figure (and section), as the heading cites it
    found: str  # what the paper found (Markdown)
    numbers: tuple  # the numbers ``found`` cites, each as printed there and in the paper's digest
    status: str  # one of STATUSES: whether this app reproduces it
    here: str  # how this app reproduces it (which tab or lesson), or why it cannot (Markdown)
    table: tuple = ()  # a table printed under ``found``: (its caption, its rows, how a cell is printed)
    note: str = ""  # printed under the table


# Table 2: T5 small -> large (S→L) and small -> XL (S→XL), T = 1, gamma = 5; rows in the paper's order.
COLUMNS = ("S→L WMT", "S→L XSum", "S→L CNNDM", "S→XL WMT", "S→XL XSum", "S→XL CNNDM")
METHODS = ("SeqCascade [Chow]", "TokenCascade [Chow]", "SpecDecode [Lossy]", "BiLD*", "SpecCascade [Chow]",
           "SpecCascade [Diff]", "SpecCascade [OPT]", "SpecCascade [Token]")
SPEEDUP = ((1.55, 0.84, 0.98, 2.46, 0.93, 0.94), (1.03, 0.93, 1.40, 1.46, 0.82, 1.51),
           (1.61, 1.10, 1.57, 2.17, 1.28, 2.07), (1.34, 1.04, 1.38, 1.85, 1.28, 1.84),
           (1.43, 1.04, 1.41, 2.01, 1.28, 1.97), (1.79, 1.17, 1.75, 2.44, 1.30, 2.15),
           (1.95, 1.17, 1.80, 2.61, 1.34, 2.21), (1.85, 1.18, 1.89, 2.50, 1.40, 1.89))
QUALITY = ((16.56, 12.97, 9.91, 16.29, 16.40, 11.18), (16.52, 13.30, 10.36, 16.65, 17.09, 11.44),
           (17.26, 13.90, 10.43, 16.94, 17.36, 11.53), (16.49, 13.81, 10.14, 15.90, 17.35, 11.35),
           (17.76, 13.82, 10.28, 16.35, 17.36, 11.39), (18.04, 14.00, 10.64, 18.07, 17.37, 11.67),
           (18.33, 14.10, 10.86, 18.09, 17.48, 11.85), (22.50, 15.85, 12.63, 22.70, 18.79, 12.63))
TIMES = "{:.2f}×".format
PLAIN = "{:.2f}".format

NAMES_HERE = ("SpecCascade [Chow], [Diff], [OPT] and [Token] are the rules `chow`, `diff`, `opt` and `v3` here; "
              "SpecDecode [Lossy] is `lossy` (with β = 1, the paper's main baseline) and BiLD* is `bild`. "
              "SeqCascade [Chow] is the Strategies tab's \"cascade\" lane, which thresholds the draft's mean max q "
              "rather than its sequence probability (Eq. 1), and TokenCascade [Chow] its \"sequential cascade\" lane "
              "with `chow`, without the paper's cap of 10 draft tokens between target calls (§E.1).")

FINDINGS = (
    Finding(
        "Speed-up at the large model's quality", "Table 2",
        "T5 small → large (S→L) and small → XL (S→XL), T = 1, γ = 5, wall-clock latency at batch size 1 on a TPUv4: "
        "how many times faster than the large model alone each method is where it matches the large model's quality. "
        "SpecCascade [OPT] is fastest on WMT (1.95× S→L, 2.61× S→XL) against SpecDecode [Lossy]'s 1.61× and "
        "2.17×; the sequential cascades mostly trail, except SeqCascade on WMT (1.55×, 2.46×).",
        ("1.95×", "2.61×", "1.61×", "2.17×", "1.55×", "2.46×"), "not reproduced",
        "No T5 checkpoints, no WMT, XSum or CNN/DM metrics and no TPU here. Every method has a counterpart "
        "(below the tables), and this machine's own speed-ups are timed in lessons 1 and 8 and the Strategies tab; "
        "the Trade-off tab's speed-up axis is a cost model priced with this machine's measured calls (or Leviathan "
        "et al.'s at a c you set), not a timed latency.",
        ("Latency↓: the large model's latency ÷ the method's, at the large model's quality (bold: the column's "
         "best)", SPEEDUP, TIMES)),
    Finding(
        "Best quality within the large model's latency", "Table 2",
        "The best BLEU (WMT) or ROUGE-2 (XSum, CNNDM) each method reaches without exceeding the large model's "
        "latency. SpecCascade [Token] is best in every column: 22.50 BLEU on S→L WMT against 18.33 for "
        "SpecCascade [OPT] and 17.26 for SpecDecode [Lossy], and 22.70 on S→XL WMT.",
        ("22.50", "18.33", "17.26", "22.70"), "not reproduced",
        "It needs task metrics at the paper's scale. The Trade-off tab's frontiers show how far a rule moves the "
        "text from the target, not how good the text is (lesson 7): on the bundled pair `v3`'s points have the "
        "lowest target NLL (docs/sweeps.md), which rewards mode-seeking text and does not say its text is better.",
        ("Best quality: BLEU (WMT), ROUGE-2 (XSum, CNNDM) (bold: the column's best)", QUALITY, PLAIN),
        NAMES_HERE),
    Finding(
        "A cascade can beat the large model, at a price in calls", "Fig. 1, Fig. 2",
        "Fig. 1 (T5, T = 1): a token-level cascade with the oracle Diff rule (Eq. 5, which needs the large model's "
        "p at every step) beats the large model's quality over a wide range of deferral rates, an ensembling effect "
        "(the paper cites Kim et al., 2023). But a token cascade calls the large model for one token at a time, "
        "where one verification of speculative decoding scores γ = 5 tokens: it needs far more large-model calls, "
        "which is why the paper runs the deferral rule inside speculative execution. Fig. 2 (T = 0.5) shows a "
        "speculative cascade above the large model: Token peaks at ≈26.8 BLEU on WMT against T5-large's ≈25.5 "
        "(read off the plot).",
        ("γ = 5", "≈26.8", "≈25.5"), "partly reproduced",
        "The calls: in the Strategies tab, with the draft model (a head cannot decode alone) and rule `diff`, the "
        "sequential cascade lane writes the speculative cascade's tokens but calls the target at every position "
        "(`diff` reads p to decide), the speculative cascade once a block. The quality above the large model is "
        "measured with task metrics on T5: not here."),
    Finding(
        "Temperature: the gap closes, and greedy opt is diff", "Fig. 6 (§E.3), Fig. 5",
        "The gap between SpecCascade [Token] and [OPT] shrinks as T → 0 (T = 1, 0.5, 0.1 shown). Under greedy "
        "decoding (T = 0, Fig. 5) OPT coincides with Diff, as Lemma 8 (§C.3) says, and every method scores higher "
        "than under sampling.",
        ("T = 1, 0.5, 0.1", "T = 0"), "partly reproduced",
        "Lemma 8, yes: lesson 5 (the derivation) derives it, and in the Compare tab rows `opt` and `diff` at one "
        "alpha and T = 0 write the same text (their deferral counts can differ: where the two models' top tokens "
        "agree, TV = 0 and pi = p = q whatever either rule decides). The shrinking gap is not: the Trade-off tab "
        "draws `opt`'s and `v3`'s frontiers at any temperature, but not against task quality."),
    Finding(
        "Block size: a wider range, a slower high-quality end", "Fig. 7 (§E.4)",
        "A larger γ widens the trade-off: the fast, low-quality points move left and the high-quality points "
        "move right, because of frequent rollbacks. On XSum with lossy speculative decoding, γ = 3 matches the "
        "small model at 0.64 of the large model's latency and the large model at 0.85; at γ = 7 there is "
        "practically no speed-up at the large model's quality.",
        ("γ = 3", "0.64", "0.85", "γ = 7"), "partly reproduced",
        "The cost side, with the Trade-off tab's gamma: where every proposal is kept a block yields gamma + 1 "
        "tokens for one target call (1/8 target call per token at gamma 7, 1/4 at gamma 3), and its cost-model "
        "axis at c prices a point with high acceptance higher at gamma 7 and a near-lossless point, whose "
        "rejections waste more draft calls, lower. Latency at the large model's quality is measured on a TPU: "
        "not here."),
    Finding(
        "Gemma: token rules above the 27B, opt behind", "Fig. 3 (§E.7, Figs. 10–11), Lemma 5",
        "Gemma-2 2B drafting for 27B (9B in Fig. 11), γ = 1, T = 1, cost as the rejection rate. Except on "
        "TriviaQA, SpecCascade [Token] reaches the 27B's quality at a lower rejection rate and the best quality "
        "overall, often above the 27B: on GSM8K ≈0.77 exact match at a rejection rate of ≈0.09 against the 27B's "
        "≈0.73 (read off the plot). OPT does less well than on T5, clearly worse on GSM8K at low rejection rates. "
        "The authors' explanation is calibration: with 2B against 27B the large model's probabilities are the "
        "better confidence signal for both models, and that is what V3 reads. Lemma 5 bounds the OPT plug-in's "
        "regret by max_v |P − q| + max_v |P − p| (P: the true next-token distribution): it is only as good as both "
        "models' calibration. Among the token rules (§E.7) V3 wins at most rejection rates; on 2B → 27B SQuAD 2.0, "
        "V2 does better, and on T5 V1 or V2 sometimes beat V3.",
        ("γ = 1", "T = 1", "≈0.77", "≈0.09", "≈0.73"), "not reproduced",
        "Gemma-2 2B, 9B and 27B do not run on this CPU, and the bundled pair's 135M target scores 0 exact match on "
        "arithmetic (docs/sweeps.md). `v1`, `v2` and `v3` run in the Compare and Trade-off tabs and are taken apart "
        "in the Sandbox tab (lesson 6)."),
    Finding(
        "A reviewer's objection: V3 truncates the tail", "Table 2, Eq. 11, Eq. 15",
        "A reviewer argued that TokenV3 at T = 1 effectively truncates low-probability tokens while the baselines "
        "sample plainly at T = 1, so Table 2's quality half is unfair without top-k or top-p baselines. The "
        "paper's own explanation of the gap: rules that compare the models' peaks suffer when the sampled token is "
        "far from the mode, which happens more at high temperature.",
        ("T = 1",), "partly reproduced",
        "The mechanism, in the Sandbox tab with `v3`: outside the accepted set pi(v) = eta p(v), the target's tail "
        "scaled down by eta ≤ 1, the draft's mass outside the set (Eq. 11, Eq. 15), a soft min-p filter on p with "
        "threshold 1 − alpha. On the bundled pair `v3` writes text the target finds likelier than lossless's own "
        "samples at the same cost (docs/sweeps.md): the mode-seeking the objection is about. Whether it explains "
        "the BLEU gap cannot be tested here."),
    Finding(
        "Limitations", "as the authors state them",
        "More total compute than a sequential cascade (the gain is latency); plug-in rules that rely on the models' "
        "calibration (a learned router is future work); objectives local to each position, not global; fairness "
        "across slices of the data not studied.",
        (), "partly reproduced",
        "The compute shows in the Strategies tab (draft model, rule `chow`): the sequential cascade calls the "
        "target only at the positions `chow` defers, the speculative cascade once a block, scoring every one of its "
        "gamma + 1 positions. Every rule here decides position by position (Eq. 7's budget is per position). "
        "Calibration: see Gemma above. Fairness is not studied here either."),
)


def cell_row(name, cells):
    """One Markdown table row (``*`` escaped in a method's name, as the paper's digest prints it)."""
    return "| " + " | ".join([name.replace("*", "\\*"), *cells]) + " |"


def table_rows(rows, fmt):
    """The Table 2 half's rows, each column's best in bold (as the paper prints it)."""
    best = [max(column) for column in zip(*rows)]
    return [cell_row(name, [f"**{fmt(v)}**" if v == top else fmt(v) for v, top in zip(values, best)])
            for name, values in zip(METHODS, rows)]


def table_markdown(caption, rows, fmt):
    header = [cell_row("Method", COLUMNS), "|" + "---|" * (len(COLUMNS) + 1)]
    return f"*{caption}*\n\n" + "\n".join(header + table_rows(rows, fmt))


def finding_markdown(k, finding):
    """One finding: a heading citing its source, what the paper found (and its table), and what this app does."""
    parts = [f"#### {k}. {finding.title} ({finding.source})", finding.found]
    if finding.table:
        parts.append(table_markdown(*finding.table))
    if finding.note:
        parts.append(finding.note)
    parts.append(f"**Here: {finding.status}.** {finding.here}")
    return "\n\n".join(parts)


INTRODUCTION = ("The paper's results (Narasimhan et al., ICLR 2025; tables, figures, equations and lemmas numbered as "
                "in arXiv 2405.19261 v2), each with whether this app reproduces it on its bundled pair (the "
                "SmolLM2-135M-Instruct target with a 4-layer distilled draft or an EAGLE-3 head, on a CPU) and how. "
                "The paper measures quality with task metrics (BLEU, ROUGE-2/L, exact match, pass@1, F1) on large "
                "evaluation sets; this app has none at that scale, and its frontiers show how far a rule moves the "
                "text from the target, not how good the text is.")


def findings_markdown():
    return "\n\n".join([INTRODUCTION] + [finding_markdown(k, f) for k, f in enumerate(FINDINGS, 1)])


def build_findings():
    """The panel, closed under the lessons: no model call, no event."""
    with gr.Accordion("What the paper found", open=False, elem_id="findings"):
        gr.Markdown(findings_markdown(), elem_id="findings-text")
