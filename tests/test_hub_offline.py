"""A hub pair that is not downloaded, with the Hub out of reach, is refused in seconds with one plain sentence
naming the models the chosen draft needs (issue 64): huggingface_hub's own retries took about 70 s before an
error that quoted a URL (escaped, it showed its backslashes in the page's status) and named the target alone."""
import socket
import time

import huggingface_hub
import pytest

from app.explore import ExploreHandlers
from app.pairs import SEED_PAIR, PairCache
from app.viz.format import markdown_text
from cascade_core import load_pair
from cascade_core.formats.loading import parse_pair
from test_app import run_to_end

HEAD = "AngelSlim/Qwen3-1.7B_eagle3"
PATIENCE = 15  # seconds: generous against the probe's 3 s, far under the retries' 70 s


@pytest.fixture
def hub_unanswering(monkeypatch, tmp_path):
    """The app started without HF_HUB_OFFLINE, an empty Hugging Face cache, and a Hub that accepts connections and
    never answers (a network that swallows requests: the slowest way to be out of reach)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)  # connections wait in the backlog, never accepted nor answered
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", f"http://127.0.0.1:{server.getsockname()[1]}")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))
    yield
    server.close()


def refusal(spec):
    """load_pair's ValueError for ``spec`` and the seconds it took."""
    start = time.perf_counter()
    with pytest.raises(ValueError) as error:
        load_pair(**parse_pair(spec), progress=lambda message: None)
    return str(error.value), time.perf_counter() - start


def test_a_hub_pair_out_of_reach_is_refused_in_seconds_in_one_sentence(hub_unanswering):
    message, seconds = refusal(SEED_PAIR)
    assert seconds < PATIENCE
    assert message == ("the target model 'Qwen/Qwen3-1.7B' and the draft 'Qwen/Qwen3-0.6B' are not downloaded to this "
                       "machine and the Hugging Face Hub cannot be reached: download them where the network is, or "
                       "choose the bundled or tiny pair")


def test_with_downloads_off_the_sentence_says_so(monkeypatch, tmp_path):
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))
    message, seconds = refusal(f"{HEAD} -> Qwen/Qwen3-1.7B")
    assert seconds < PATIENCE
    assert message.startswith("the target model 'Qwen/Qwen3-1.7B' and the EAGLE-3 head "
                              "'AngelSlim/Qwen3-1.7B_eagle3' are not downloaded to this machine and downloads are "
                              "off (HF_HUB_OFFLINE=1)")


def test_a_downloaded_model_is_not_refused(monkeypatch, tmp_path):
    """Only what is missing is named: a target in the cache is not (and a folder never is)."""
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))
    repo, commit = tmp_path / "models--Qwen--Qwen3-1.7B", "0" * 40
    (repo / "snapshots" / commit).mkdir(parents=True)
    (repo / "snapshots" / commit / "config.json").write_text("{}")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    message, _ = refusal(f"{tmp_path / 'nowhere'} -> Qwen/Qwen3-1.7B")
    assert message.startswith("the draft '") and " is not downloaded to this machine" in message
    assert "Qwen3-1.7B'" not in message


@pytest.mark.parametrize("draft, named, not_named", [("head", HEAD, "Qwen/Qwen3-0.6B"),
                                                     ("model", "Qwen/Qwen3-0.6B", HEAD)])
def test_explore_says_it_in_its_status_naming_the_draft_chosen(hub_unanswering, draft, named, not_named):
    handlers = ExploreHandlers(PairCache(), SEED_PAIR)
    start = time.perf_counter()
    with pytest.warns(UserWarning) as toast:
        view = run_to_end(handlers, pair=SEED_PAIR, draft=draft)
    assert time.perf_counter() - start < PATIENCE
    sentence = str(toast[-1].message)
    assert repr(named) in sentence and not_named not in sentence
    assert "not downloaded to this machine and the Hugging Face Hub cannot be reached" in sentence
    assert view.status == f"⚠️ {markdown_text(sentence)}"  # the sentence as text: no link, no line break
    assert "http" not in sentence and "\n" not in sentence
