"""Multi-hop search: a follow-up query from the best hit finds the document one hop away.

The pure merge (:func:`round_robin`) and follow-up text are checked directly; the search end to
end runs on a real memory (real chromadb, real embedding model, real FTS5) with a bridge question
whose second document shares no rare word with the question."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_memory.index.embedding import index_embedder
from agent_memory import AgentMemory, InvalidArgumentError, MemoryConfig
from agent_memory.index.fusion import (
    MAX_FOLLOW_UP_KEYWORDS, MULTI_HOP_MAX_QUERY_CHARS, SCORE_TOLERANCE, follow_up_keywords, follow_up_text,
    round_robin,
)
from agent_memory.limits import MAX_QUERY_CHARS


def test_round_robin_keeps_the_lead_then_alternates_and_skips_what_was_taken() -> None:
    assert round_robin(["a", "b", "c", "d"], ["b", "x", "a", "y"]) == ["a", "b", "x", "c", "y", "d"]
    assert round_robin(["a"], ["a", "b", "c"]) == ["a", "b", "c"]
    assert round_robin(["a", "b", "c"], []) == ["a", "b", "c"]
    assert round_robin([], ["x", "y"]) == ["x", "y"]


def test_follow_up_text_adds_the_first_words_of_the_lead_within_the_query_bound() -> None:
    assert follow_up_text("who?", "one two   three\nfour", words=3) == "who? one two three"
    assert follow_up_text("who?", "  ", words=3) == "who?"
    long = follow_up_text("q" * (MAX_QUERY_CHARS - 5), "alpha beta gamma", words=3)
    assert len(long) == MAX_QUERY_CHARS


def test_follow_up_keywords_are_the_new_names_and_numbers_of_the_lead() -> None:
    lead = "Frozen Lake is a 1998 drama film directed by Ilse Varnhagen, born in Tromsø. It won an award."
    assert follow_up_keywords("Who directed Frozen Lake?", lead, words=60) == (
        "Who directed Frozen Lake? 1998 Ilse Varnhagen Tromsø It"
    )
    assert follow_up_keywords("Who directed Frozen Lake?", lead, words=6) == "Who directed Frozen Lake? 1998"
    assert follow_up_keywords("q", "only lower case words here", words=60) == "q"
    many = " ".join(f"Name{n}" for n in range(40))
    assert follow_up_keywords("q", many, words=60).split()[1:] == [f"Name{n}" for n in range(MAX_FOLLOW_UP_KEYWORDS)]


QUESTION = "Which river flows through the birthplace of the architect who designed the Halvorsen Library?"
FIRST_HOP = (
    "The Halvorsen Library is a public library completed in 1931, designed by the architect Mirela Oskarsdottir."
)
SECOND_HOP = "Mirela Oskarsdottir grew up in Varnby, a small town in the north, and studied in Oslo."
DISTRACTORS = [
    "The river Thames flows through London, the birthplace of many famous architects.",
    "Library architecture of the 1930s favoured tall windows and reading rooms designed around daylight.",
    "The Danube is a river that flows through ten countries, including Austria and Hungary.",
    "Halvorsen is a common Norwegian surname; the Halvorsen family ran a shipping firm.",
    "New Orleans, the birthplace of jazz, lies on the Mississippi river.",
    "An architect designs buildings; many public library buildings were designed by city architects.",
]


@pytest.fixture
def bridge_memory(tmp_path: Path) -> dict[str, str]:
    memory = AgentMemory("hops", tmp_path)
    ids = {"first": memory.store(FIRST_HOP), "second": memory.store(SECOND_HOP)}
    for n, text in enumerate(DISTRACTORS):
        ids[f"d{n}"] = memory.store(text)
    memory.close()
    return ids


def top_ids(tmp_path: Path, *, multi_hop: bool, limit: int = 3) -> list[str]:
    with AgentMemory("hops", tmp_path, config=MemoryConfig(multi_hop=multi_hop)) as memory:
        return [hit.item.id for hit in memory.query(text=QUESTION, limit=limit)]


def test_the_follow_up_finds_the_second_hop_that_one_query_misses(
    tmp_path: Path, bridge_memory: dict[str, str]
) -> None:
    single = top_ids(tmp_path, multi_hop=False)
    hops = top_ids(tmp_path, multi_hop=True)

    assert single[0] == hops[0] == bridge_memory["first"]
    assert bridge_memory["second"] not in single
    assert bridge_memory["second"] in hops


def test_multi_hop_hits_keep_descending_scores_and_their_own_chunks(
    tmp_path: Path, bridge_memory: dict[str, str]
) -> None:
    with AgentMemory("hops", tmp_path) as memory:
        hits = memory.query(text=QUESTION, limit=8)
    scores = [hit.score for hit in hits]
    assert scores == sorted(scores, reverse=True) and len(set(scores)) == len(scores)
    assert len({hit.item.id for hit in hits}) == len(hits) == 8
    second = next(hit for hit in hits if hit.item.id == bridge_memory["second"])
    assert second.chunk == SECOND_HOP and second.similarity is not None


def test_a_query_for_one_item_asks_no_follow_up(tmp_path: Path, bridge_memory: dict[str, str]) -> None:
    assert top_ids(tmp_path, multi_hop=True, limit=1) == top_ids(tmp_path, multi_hop=False, limit=1)


def test_a_long_query_asks_no_follow_up(
    tmp_path: Path, bridge_memory: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with AgentMemory("hops", tmp_path) as memory:
        index_embedder(memory.config).clear()  # query vectors are cached process-wide: start from none
        embedder = index_embedder(memory.config).embedder
        embedded: list[list[str]] = []
        real_embed = embedder.embed
        monkeypatch.setattr(embedder, "embed", lambda texts: embedded.append(texts) or real_embed(texts))
        memory.query(text=QUESTION, limit=3)
        assert len(embedded) == 2  # the question and its follow-up
        long = (QUESTION + " ") * (MULTI_HOP_MAX_QUERY_CHARS // len(QUESTION) + 1)
        memory.query(text=long, limit=3)
        assert len(embedded) == 3 and embedded[2] == [long]


def test_a_similarity_ranking_is_one_dense_search_scored_by_its_cosine(
    tmp_path: Path, bridge_memory: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``ranking="similarity"`` (what LangGraph's store ranks by): the dense ranking alone, each
    hit's ``score`` its cosine, as a memory configured without keywords or follow-up ranks."""
    dense_config = MemoryConfig(hybrid_search=False, multi_hop=False)
    with AgentMemory("hops", tmp_path / "dense", config=dense_config) as plain:
        for text in [FIRST_HOP, SECOND_HOP, *DISTRACTORS]:
            plain.store(text)
        expected = [(plain.get(hit.item.id).content, hit.score) for hit in plain.query(text=QUESTION, limit=8)]
    with AgentMemory("hops", tmp_path) as memory:
        index_embedder(memory.config).clear()  # query vectors are cached process-wide: start from none
        embedder = index_embedder(memory.config).embedder
        embedded: list[list[str]] = []
        real_embed = embedder.embed
        monkeypatch.setattr(embedder, "embed", lambda texts: embedded.append(texts) or real_embed(texts))
        hits = memory.query(text=QUESTION, limit=8, ranking="similarity")
        assert embedded == [[QUESTION]]  # no follow-up query
        found = [memory.get(hit.item.id).content for hit in hits]
        with pytest.raises(InvalidArgumentError, match="ranking"):
            memory.query(text=QUESTION, ranking="bm25")  # type: ignore[arg-type]
    scores = [hit.score for hit in hits]
    assert all(hit.score == hit.similarity for hit in hits) and scores == sorted(scores, reverse=True)  # type: ignore[type-var]
    assert [text for text, _ in expected] == found
    assert all(abs(a - b) <= SCORE_TOLERANCE for (_, a), b in zip(expected, scores, strict=True))  # type: ignore[operator]
    assert bridge_memory["second"] not in [hit.item.id for hit in hits[:3]]  # the follow-up's find is not there
