"""transformers' generate(custom_generate=<this repo>) runs the cascade for every deferral name, and treats
generate's own arguments the way generate does: lengths, end-of-text, padding, stopping criteria, streamers,
dict outputs; what it cannot do is refused naming the argument."""
import threading
from pathlib import Path

import pytest
import torch
from transformers import StoppingCriteria, TextIteratorStreamer, TextStreamer
from transformers.generation import GenerateDecoderOnlyOutput
from transformers.generation.streamers import BaseStreamer

from cascade_core import generate
from cascade_core.formats.eagle3_head import load_head, save_head
from cascade_core.formats.loading import tiny_pair
from cascade_core.formats.pair import make_pair

REPO = str(Path(__file__).resolve().parents[1])
CASCADE = dict(custom_generate=REPO, trust_remote_code=True)


@pytest.fixture(scope="module")
def pair():
    return tiny_pair()


def entry(pair, **kwargs):
    """The seed's call, as a user writes it."""
    return pair.target.generate(assistant_model=pair.draft, **CASCADE, **kwargs)


def engine_seed(torch_seed):
    torch.manual_seed(torch_seed)
    return int(torch.randint(0, 2**31 - 1, ()))  # the entry point's default seed source


@pytest.mark.parametrize("deferral", ["opt", "v1", "v2", "v3", "chow", "diff"])
@pytest.mark.parametrize("do_sample", [True, False])
def test_custom_generate_matches_engine(pair, deferral, do_sample):
    inputs = pair.tokenizer("Who is Buzz Aldrin?", return_tensors="pt")
    torch.manual_seed(5)
    out = entry(pair, **inputs, do_sample=do_sample, alpha=0.25, deferral=deferral, max_new_tokens=32)
    prompt = inputs["input_ids"][0].tolist()
    trace = generate(pair, prompt_ids=prompt, rule=deferral, alpha=0.25, gamma=4,
                     temperature=1.0 if do_sample else 0.0, seed=engine_seed(5), max_new_tokens=32)
    assert out[0].tolist() == prompt + trace.tokens


def test_custom_generate_greedy_lossless_is_target_greedy(pair):
    inputs = pair.tokenizer("The cascade", return_tensors="pt")
    plain = pair.target.generate(**inputs, do_sample=False, max_new_tokens=24)
    ours = entry(pair, **inputs, do_sample=False, deferral="lossless", max_new_tokens=24)
    assert ours.tolist() == plain.tolist()


@pytest.fixture(scope="module")
def head_folder(tmp_path_factory):
    """The tiny target's random EAGLE-3 head, saved in the published format."""
    folder = tmp_path_factory.mktemp("head")
    save_head(tiny_pair(draft_kind="head").draft, folder)
    return folder


@pytest.mark.parametrize("deferral", ["v3", "opt", "lossless"])
def test_a_head_passed_as_draft_head_runs_the_engines_cascade(pair, head_folder, deferral):
    inputs = pair.tokenizer("Who is Buzz Aldrin?", return_tensors="pt")
    torch.manual_seed(5)
    out = pair.target.generate(**inputs, draft_head=str(head_folder), **CASCADE, do_sample=True, alpha=0.25,
                               deferral=deferral, gamma=3, max_new_tokens=32)
    prompt = inputs["input_ids"][0].tolist()
    head_pair = make_pair("tiny+head", pair.target, load_head(head_folder, pair.target), pair.tokenizer)
    trace = generate(head_pair, prompt_ids=prompt, rule=deferral, alpha=0.25, gamma=3, seed=engine_seed(5),
                     max_new_tokens=32)
    assert out[0].tolist() == prompt + trace.tokens
    greedy = pair.target.generate(**inputs, draft_head=str(head_folder), **CASCADE, do_sample=False,
                                  deferral="lossless", max_new_tokens=24)
    assert greedy.tolist() == pair.target.generate(**inputs, do_sample=False, max_new_tokens=24).tolist()


def test_a_head_and_a_draft_model_together_or_a_head_that_does_not_load_are_refused(pair, tmp_path):
    inputs = pair.tokenizer("Hi", return_tensors="pt")
    with pytest.raises(ValueError, match="^draft_head: the cascade has one draft"):
        entry(pair, **inputs, draft_head="x", max_new_tokens=4)
    with pytest.raises(ValueError, match="^draft_head: could not load .* as an EAGLE-3 head"):
        pair.target.generate(**inputs, draft_head=str(tmp_path), **CASCADE, max_new_tokens=4)


def left_padded(pair, texts, pad=0):
    prompts = [pair.tokenizer(text, add_special_tokens=False)["input_ids"] for text in texts]
    width = max(map(len, prompts))
    input_ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])
    attention_mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    return prompts, input_ids, attention_mask


def test_a_left_padded_batch_keeps_its_layout_and_runs_as_one_batch(pair, monkeypatch):
    """Rows of different lengths, left-padded as tokenizers give them: one engine batch, each row its solo run,
    output[:, width:] the new tokens, finished rows padded with pad_token_id."""
    prompts, input_ids, attention_mask = left_padded(
        pair, ("Who is Buzz Aldrin?", "The cascade", "A somewhat longer prompt than the others"))
    from cascade_core.decoding.batch_block import Batch

    batches = []
    start = Batch.__init__
    monkeypatch.setattr(Batch, "__init__",
                        lambda self, pair, rows: batches.append(len(rows)) or start(self, pair, rows))
    eos = 9  # a common token of this random pair, so rows end at different lengths
    out = entry(pair, input_ids=input_ids, attention_mask=attention_mask, do_sample=True, alpha=0.3,
                deferral="v3", seed=11, max_new_tokens=20, eos_token_id=eos, pad_token_id=95)
    assert batches == [3]
    width = input_ids.shape[1]
    assert out[:, :width].tolist() == input_ids.tolist()
    lengths = []
    for b, prompt in enumerate(prompts):
        trace = generate(pair, prompt_ids=prompt, rule="v3", alpha=0.3, gamma=4, temperature=1.0, seed=11,
                         max_new_tokens=20, eos_token_ids=[eos])
        new = out[b, width:].tolist()
        assert new == trace.tokens + [95] * (len(new) - len(trace.tokens))
        lengths.append(len(trace.tokens))
    assert len(set(lengths)) > 1 and max(lengths) == out.shape[1] - width


def test_max_length_counts_the_padded_input_and_min_new_tokens_holds_back_end_of_text():
    small = tiny_pair(vocab_size=12)  # end-of-text (11) is common here
    prompt, early = torch.tensor([[1, 2, 3]]), 0
    for seed in range(6):
        settings = dict(do_sample=True, seed=seed, max_length=23, deferral="v3", alpha=0.5)
        free = small.target.generate(prompt, assistant_model=small.draft, **CASCADE, **settings)
        held = small.target.generate(prompt, assistant_model=small.draft, **CASCADE, **settings, min_new_tokens=15)
        trace = generate(small, prompt_ids=[1, 2, 3], rule="v3", alpha=0.5, seed=seed, max_new_tokens=20,
                         min_new_tokens=15)
        assert held[0, 3:].tolist()[: len(trace.tokens)] == trace.tokens and len(trace.tokens) >= 15
        assert 11 not in held[0, 3:18].tolist() and free.shape[1] <= 23 and held.shape[1] <= 23
        early += free.shape[1] < 3 + 15
    assert early, "no run ended before 15 tokens without min_new_tokens: the test would not see it work"


def test_stopping_criteria_end_a_row_at_the_first_token_they_hold(pair):
    inputs = pair.tokenizer("Who is Buzz Aldrin?", return_tensors="pt")
    width = inputs["input_ids"].shape[1]
    free = entry(pair, **inputs, do_sample=True, seed=3, max_new_tokens=40, deferral="chow", alpha=0.5)
    token = free[0, width + 6].item()

    class AtToken(StoppingCriteria):
        def __call__(self, input_ids, scores, **kwargs):
            return input_ids[:, -1] == token

    cut = entry(pair, **inputs, do_sample=True, seed=3, max_new_tokens=40, deferral="chow", alpha=0.5,
                stopping_criteria=[AtToken()])
    first = free[0, width:].tolist().index(token)
    assert cut[0].tolist() == free[0, : width + first + 1].tolist()


def test_stop_strings_with_the_tokenizer(pair):
    inputs = pair.tokenizer("Count: 1, 2,", return_tensors="pt")
    free = entry(pair, **inputs, do_sample=True, seed=3, max_new_tokens=40)
    text = pair.tokenizer.decode(free[0, inputs["input_ids"].shape[1]:])
    stop = text[5:7]
    cut = entry(pair, **inputs, do_sample=True, seed=3, max_new_tokens=40, stop_strings=stop,
                tokenizer=pair.tokenizer)
    new = pair.tokenizer.decode(cut[0, inputs["input_ids"].shape[1]:])
    assert new.endswith(stop) and text.startswith(new) and len(new) < len(text)


class Recorder(BaseStreamer):
    def __init__(self):
        self.puts, self.ended = [], 0

    def put(self, value):
        assert not self.ended
        self.puts.append(value.tolist())

    def end(self):
        self.ended += 1


def test_streamers_get_the_prompt_then_every_token_then_end(pair, capsys):
    inputs = pair.tokenizer("Who is Buzz Aldrin?", return_tensors="pt")
    recorder = Recorder()
    out = entry(pair, **inputs, do_sample=True, seed=2, max_new_tokens=30, streamer=recorder)
    prompt = inputs["input_ids"].tolist()
    assert recorder.puts[0] == prompt and recorder.ended == 1
    assert all(len(p) == 1 for p in recorder.puts[1:])
    assert [p[0] for p in recorder.puts[1:]] == out[0, len(prompt[0]):].tolist()
    entry(pair, **inputs, do_sample=True, seed=2, max_new_tokens=30, streamer=TextStreamer(pair.tokenizer,
                                                                                           skip_prompt=True))
    assert capsys.readouterr().out.strip() == pair.tokenizer.decode(out[0, len(prompt[0]):]).strip()
    chunks = TextIteratorStreamer(pair.tokenizer, skip_prompt=True)  # a chat UI's way: generate in a thread
    thread = threading.Thread(target=entry, args=(pair,), kwargs=dict(**inputs, do_sample=True, seed=2,
                                                                      max_new_tokens=30, streamer=chunks))
    thread.start()
    assert "".join(chunks) == pair.tokenizer.decode(out[0, len(prompt[0]):])
    thread.join()


def test_return_dict_in_generate_gives_generates_output(pair):
    inputs = pair.tokenizer("The cascade", return_tensors="pt")
    plain = entry(pair, **inputs, do_sample=True, seed=4, max_new_tokens=12)
    out = entry(pair, **inputs, do_sample=True, seed=4, max_new_tokens=12, return_dict_in_generate=True)
    assert isinstance(out, GenerateDecoderOnlyOutput) and out.sequences.tolist() == plain.tolist()
    assert out.scores is None


@pytest.mark.parametrize("kwargs, named", [
    (dict(num_beams=2), "num_beams"),
    (dict(num_return_sequences=2, do_sample=True), "num_return_sequences"),
    (dict(output_scores=True, return_dict_in_generate=True), "output_scores"),
    (dict(top_k=5, do_sample=True), "top_k"),
    (dict(repetition_penalty=1.2), "repetition_penalty"),
    (dict(logits_processor=[lambda ids, scores: scores]), "logits_processor"),
    (dict(stop_strings="x"), "stop_strings"),
    (dict(assistant_tokenizer=object()), "assistant_tokenizer"),
])
def test_what_the_cascade_cannot_do_is_refused_naming_the_argument(pair, kwargs, named):
    inputs = pair.tokenizer("The cascade", return_tensors="pt")
    with pytest.raises(ValueError, match=f"^{named}"):
        entry(pair, **inputs, max_new_tokens=8, **kwargs)


def test_a_streamer_with_a_batch_and_a_missing_draft_are_refused(pair):
    _, input_ids, attention_mask = left_padded(pair, ("a b", "c"))
    with pytest.raises(ValueError, match="^streamer: .* batch of 2"):
        entry(pair, input_ids=input_ids, attention_mask=attention_mask, max_new_tokens=4, streamer=Recorder())
    with pytest.raises(ValueError, match="^assistant_model"):
        pair.target.generate(input_ids=input_ids, **CASCADE, max_new_tokens=4)


def test_reshaping_settings_in_the_models_config_are_named_in_a_warning(pair):
    inputs = pair.tokenizer("The cascade", return_tensors="pt")
    pair.target.generation_config.top_k = 20
    try:
        with pytest.warns(UserWarning, match="top_k=20"):
            entry(pair, **inputs, do_sample=True, max_new_tokens=4)
    finally:
        pair.target.generation_config.top_k = None


def test_the_seed_call_on_the_bundled_pair_is_the_engines_run(bundled):
    """A real tokenizer with a chat template and its own end-of-text, as a user of the seed's snippet has."""
    text = bundled.tokenizer.apply_chat_template([{"role": "user", "content": "Who is Buzz Aldrin?"}],
                                                 add_generation_prompt=True, tokenize=False)
    inputs = bundled.tokenizer(text, return_tensors="pt")
    torch.manual_seed(5)
    out = entry(bundled, **inputs, do_sample=True, alpha=0.25, deferral="v3", max_new_tokens=24,
                tokenizer=bundled.tokenizer)
    prompt = inputs["input_ids"][0].tolist()
    trace = generate(bundled, prompt_ids=prompt, rule="v3", alpha=0.25, seed=engine_seed(5), max_new_tokens=24)
    assert out[0].tolist() == prompt + trace.tokens
