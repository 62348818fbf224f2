"""Items stored after a repetitive result stay findable, and an exact key finds what holds it.

A result made of one repeated line (a log, a padded page, a run of one character) used to put
hundreds of identical vectors into the vector index, and the approximate (HNSW) search of Chroma
and pgvector then lost items stored after it. An exact identifier (``ZZ-0001``) used to rank below
every item the embedding model liked better, and text past ``max_embedded_chars`` (keyword only)
below every dense hit. Checked on the file backend (Chroma), Postgres (pgvector, a real server) and
``memory://`` (exact search in numpy, with the same embedding bounds and an in-memory keyword index).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_memory.index.embedding import index_embedder
from agent_memory import AgentMemory, MemoryCriteria
from agent_memory.index.chunking import chunks_to_embed, item_chunks
from agent_memory.models.items import ItemRecord
from agent_memory.testing import PostgresServer
from agent_memory.tokens import default_token_counter

REPETITIVE = {
    "log": "GET /healthz 200 OK 0.4ms\n" * 2300,
    "one_character": "a" * 200_000 + "!",
    "one_word": " ".join(["word"] * 30_000),
}
"""The three results of the probe that found the fault (issue 37)."""

FACTS = [
    ("The heron nests in tall reeds beside the river.", "where does that wading bird build its home"),
    ("Our office wifi password rotates every Monday morning.", "when does the wireless passphrase change"),
    ("The quarterly budget review moved to Thursday afternoon.", "finance meeting rescheduled day"),
    ("Alice prefers green tea over coffee after lunch.", "which hot beverage does she like"),
    ("The server room must stay below twenty-two degrees.", "maximum temperature allowed for the machines"),
    ("Invoice 4471 was settled by bank wire on March third.", "how was that bill paid"),
    ("The cat refuses dry kibble since we moved house.", "pet stopped eating its food"),
    ("Every merge triggers the integration suite in CI.", "when are automated checks executed"),
    ("The library closes early on public holidays.", "opening hours during festive days"),
    ("Bob's flight to Lisbon leaves at dawn from gate B12.", "when is he flying to Portugal"),
    ("Vaccines train the immune system to recognise pathogens.", "how do immunisations protect the body"),
    ("The bridge was repainted bright red last summer.", "color of the crossing over the water"),
    ("Photosynthesis turns sunlight into chemical energy in leaves.", "how plants make food from light"),
    ("Our landlord raised the rent by five percent.", "apartment lease cost went up"),
    ("The volcano erupted twice during the eighteenth century.", "history of eruptions of that mountain"),
    ("She learned to play the cello at the age of seven.", "when did she start the string instrument"),
    ("The marathon route passes the old cathedral.", "course of the long-distance running race"),
    ("Coffee beans are roasted in small batches on Fridays.", "when is the roastery working"),
    ("The museum's dinosaur skeleton is a plaster replica.", "is the fossil display genuine"),
    ("Tides are caused mainly by the moon's gravity.", "why does the sea level rise and fall"),
    ("The startup hired three backend engineers this month.", "new developers recruited recently"),
    ("Our garden tomatoes ripened late because of rain.", "vegetables delayed by wet weather"),
    ("The train to Vienna was cancelled due to a strike.", "rail journey called off because workers protested"),
    ("Penguins huddle together to survive Antarctic winters.", "how do those flightless birds keep warm"),
    ("The novel was translated into forty languages.", "how many translations of the book exist"),
    ("My grandmother bakes rye bread every Sunday.", "weekly baking habit of the elderly relative"),
    ("The firmware update fixed the bluetooth pairing bug.", "wireless connection issue resolved by patch"),
    ("Honeybees communicate food locations by dancing.", "how insects tell the hive where flowers are"),
    ("The chess club meets in the basement on Tuesdays.", "where do board game players gather"),
    ("Glaciers in the Alps have shrunk by half since 1900.", "ice loss in European mountains"),
]
"""30 short facts, each with a paraphrase that shares almost no word with it (so the keyword
index cannot stand in for the vector index)."""


@pytest.fixture(params=["files", "postgres", "memory"])
def backend_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgres":
        server: PostgresServer = request.getfixturevalue("postgres_server")
        return server.new_database()
    if request.param == "memory":
        return f"memory://{request.node.name}"
    return str(tmp_path / "memory")


def test_facts_stored_after_repetitive_results_are_found_by_meaning(backend_url: str) -> None:
    memory = AgentMemory("repetitive", backend_url)
    for text in REPETITIVE.values():
        memory.store(text, type="action_result", source="tool")
    ids = memory.store_many({"content": fact, "type": "custom", "source": "agent"} for fact, _ in FACTS)
    missed = [question for (_, question), item_id in zip(FACTS, ids, strict=True)
              if item_id not in [hit.item.id for hit in memory.query(question, limit=5)]]
    assert missed == []
    memory.close()


def test_a_repetitive_result_gets_a_few_vectors_and_every_chunk_in_the_keyword_index(tmp_path: Path) -> None:
    memory = AgentMemory("repetitive", tmp_path / "memory")
    log_id = memory.store(REPETITIVE["log"] + "tail: the last probe failed with ECONNRESET\n", source="tool")
    memory.flush_index()  # the test reads the vector index directly
    chunks = item_chunks(record_of(memory, log_id), memory.get(log_id).content, default_token_counter(), max_chars=2_000_000,
                         chunk_tokens=memory.config.chunk_tokens, overlap_tokens=memory.config.chunk_overlap_tokens)
    assert len(chunks) > 100
    embedded = chunks_to_embed(chunks, max_start_char=memory.config.max_embedded_chars)
    assert embedded[0].chunk_index == 0 and len(embedded) <= 3
    assert memory.index.item_ids() == {log_id}
    query = index_embedder(memory.config).embed_query("healthz")
    assert len(memory.index.search(query, MemoryCriteria(), n_chunks=50)) == len(embedded)
    hits = memory.query("ECONNRESET", limit=1)  # the tail chunk is a twin of none: found, by keyword at least
    assert hits[0].item.id == log_id and "ECONNRESET" in (hits[0].chunk or "")
    memory.close()


def record_of(memory: AgentMemory, item_id: str) -> ItemRecord:
    return next(record for record in memory.records() if record.id == item_id)


def test_chunks_of_real_text_are_all_embedded(data_dir: Path, tmp_path: Path) -> None:
    """Near-duplicate removal leaves real text alone: every chunk of a real page within the bound
    keeps its vector."""
    page = (data_dir / "webpages/readability/002/source.html").read_text(encoding="utf-8")
    memory = AgentMemory("page", tmp_path / "memory")
    page_id = memory.store(page, type="web_content", source="https://example.org")
    record = record_of(memory, page_id)
    chunks = item_chunks(record, page, default_token_counter(), max_chars=2_000_000, chunk_tokens=160, overlap_tokens=32)
    assert len(chunks) > 5
    assert chunks_to_embed(chunks, max_start_char=None) == chunks
    memory.close()


def test_an_exact_key_finds_what_holds_it_whatever_the_dense_ranking(backend_url: str) -> None:
    memory = AgentMemory("keys", backend_url)
    lines = ["ZZ-0001 service started on node-7"]
    lines += [f"2024-05-01T10:{n // 60 % 60:02d}:{n % 60:02d}Z worker-{n % 13} processed batch {n * 7919 % 99991} "
              f"in {n % 997 / 1000:.3f}s" for n in range(4_000)]
    lines.insert(3_000, "QX-77131 checksum mismatch on shard 4")  # past max_embedded_chars: keyword only
    log = "\n".join(lines)
    assert log.index("QX-77131") > memory.config.max_embedded_chars
    log_id = memory.store(log, type="action_result", source="app.log")
    memory.store_many({"content": f"Note {n}: zones are named with ZZ prefixes and numbered nodes; shards with QX "
                                  "codes.", "source": "agent"} for n in range(25))
    for key in ("ZZ-0001", "zz-0001", "QX-77131"):
        hits = memory.query(key, limit=5)
        assert hits[0].item.id == log_id, key
        assert key.casefold() in (hits[0].chunk or "").casefold()
        assert [hit.score for hit in hits] == sorted((hit.score for hit in hits), reverse=True)
    assert memory.query("ZZ-00012", limit=1)[0].item.id != log_id or "ZZ-00012" not in log
    memory.close()


def test_a_question_is_ranked_by_fusion_not_by_verbatim_words(tmp_path: Path) -> None:
    """Verbatim matching is for what the text names: a question appears in nothing, so the
    follow-up hop still runs and the dense ranking still counts."""
    from agent_memory.index.fusion import verbatim_matches
    from agent_memory.storage.vector import ChunkHit

    hit = ChunkHit(item_id="a", chunk_index=0, body="The ZZ-0001 zone. Herons nest in reeds.", start_char=0, score=1.0)
    assert set(verbatim_matches("zz 0001", [hit])) == {"a"}
    assert set(verbatim_matches("ZZ-0001", [hit])) == {"a"}
    assert verbatim_matches("ZZ-000", [hit]) == {}
    assert verbatim_matches("where do herons nest", [hit]) == {}
    assert set(verbatim_matches("herons NEST", [hit])) == {"a"}
