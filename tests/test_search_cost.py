"""What keeps a text query cheap in a large memory: the keyword search's budget of postings, the
Rocchio follow-up vector (no second embedding) and the torch threads of a query embedding.

The budget (``MemoryConfig.keyword_max_postings``) is checked as a pure choice of words
(:func:`within_budget`), then on a real FTS5 index, whose document frequencies come from FTS5's
own tokenizer (stemmed), and end to end through ``AgentMemory.query``. Rocchio's formula is
checked directly, and the follow-up that uses it runs on a real memory. The thread setting is
checked on torch itself. Latencies are measured in benchmarks/bench_scale.py, not here."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from agent_memory.index.embedding import index_embedder
from agent_memory import AgentMemory, MemoryConfig
from agent_memory.embeddings import torch_threads
from agent_memory.index.fusion import ROCCHIO_BETA, rocchio
from agent_memory.storage.lexical import LexicalIndex
from agent_memory.storage.keyword import within_budget
from agent_memory.storage.vector import IndexChunk
from agent_memory.models.items import MemoryCriteria


def test_within_budget_takes_the_rarest_words_and_keeps_their_order() -> None:
    costs = [("river", 40), ("the", 900), ("varnby", 2), ("town", 300), ("ghost", 0)]
    assert within_budget(costs, None) == ["river", "the", "varnby", "town"]
    assert within_budget(costs, 350) == ["river", "varnby", "town"]
    assert within_budget(costs, 341) == ["river", "varnby"]  # 2 + 40 + 300 = 342 > 341
    assert within_budget(costs, 1) == ["varnby"]  # the rarest is kept even over the budget
    assert within_budget([("ghost", 0)], 10) == []


def test_a_tie_in_postings_keeps_the_earlier_word() -> None:
    assert within_budget([("b", 5), ("a", 5), ("c", 5)], 10) == ["b", "a"]


def chunk(n: int, text: str) -> IndexChunk:
    return IndexChunk(item_id=f"item{n}", chunk_index=0, text=text, header_chars=0, start_char=0,
                      type="custom", source="test", timestamp_s=float(n))


@pytest.fixture
def lexical(tmp_path: Path) -> LexicalIndex:
    index = LexicalIndex(tmp_path / "lexical.sqlite3")
    texts = [f"Runners were running along the harbour on day {n}." for n in range(12)]
    texts += ["The lighthouse keeper ran one lap around the harbour.", "A quiet lighthouse keeper."]
    index.add([chunk(n, text) for n, text in enumerate(texts)])
    yield index
    index.close()


def test_postings_count_the_chunks_of_each_stemmed_term(lexical: LexicalIndex) -> None:
    # "running" and "runners" stem to run/runner; "ran" is its own term; a two-term word is a phrase
    assert lexical.postings(["running", "harbour", "lighthouse", "ran", "absent", "harbour_day"]) == [
        ("running", 12), ("harbour", 13), ("lighthouse", 2), ("ran", 1), ("absent", 0), ("harbour_day", 25),
    ]
    assert lexical.postings([]) == []
    assert lexical.postings(["harbour"]) == [("harbour", 13)]  # the scratch table was emptied


def test_a_budget_leaves_the_common_words_out_of_the_match(lexical: LexicalIndex) -> None:
    criteria = MemoryCriteria(text="x", limit=5)
    every_word = lexical.search("lighthouse harbour", criteria, n_chunks=20)
    assert len(every_word) == 14  # every chunk with either word
    rare_only = lexical.search("lighthouse harbour", criteria, n_chunks=20, max_postings=5)
    assert {hit.item_id for hit in rare_only} == {"item12", "item13"}
    assert lexical.search("absent words only", criteria, n_chunks=20, max_postings=5) == []


def test_equal_keyword_scores_keep_the_order_chunks_were_written(lexical: LexicalIndex) -> None:
    criteria = MemoryCriteria(text="x", limit=5)
    hits = lexical.search("runners", criteria, n_chunks=20)
    assert len({hit.score for hit in hits}) == 1  # twelve chunks of one length, one match each
    assert [hit.item_id for hit in hits] == [f"item{n}" for n in range(12)]
    assert [hit.item_id for hit in lexical.search("runners", criteria, n_chunks=3)] == ["item0", "item1", "item2"]
    assert lexical.search("lighthouse keeper", criteria, n_chunks=1)[0].body == "A quiet lighthouse keeper."


def test_the_default_budget_leaves_out_a_word_of_six_thousand_chunks(tmp_path: Path) -> None:
    """The default budget (5,000 postings, sized to a keyword search that ends beside an int8
    embedding; it was 10,000) leaves a word that 6,000 chunks hold out of a search that has a
    rarer one, so the search scores the rare word's chunks only."""
    index = LexicalIndex(tmp_path / "big.sqlite3")
    index.add([chunk(n, f"Cargo report {n} from the harbour.") for n in range(6_000)])
    index.add([chunk(6_000, "The lighthouse stands beside the harbour.")])
    criteria = MemoryCriteria(text="x", limit=5)
    budget = MemoryConfig().keyword_max_postings
    assert index.postings(["lighthouse", "harbour"]) == [("lighthouse", 1), ("harbour", 6_001)]
    hits = index.search("lighthouse harbour", criteria, n_chunks=50, max_postings=budget)
    assert [hit.item_id for hit in hits] == ["item6000"]  # harbour (6,001 postings) left out
    assert len(index.search("lighthouse harbour", criteria, n_chunks=50, max_postings=None)) == 50
    index.close()


def test_the_memory_applies_its_configured_budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with AgentMemory("budget", tmp_path) as memory:
        for n in range(30):
            memory.store(f"Shipping report {n}: cargo moved through the harbour without delay.")
        keeper = memory.store("Ilse Varnhagen kept the harbour lighthouse for forty years.")
    for budget, matched in ((None, 31), (10, 1)):
        with AgentMemory("budget", tmp_path, config=MemoryConfig(keyword_max_postings=budget)) as memory:
            found: list[int] = []
            real_search = memory.lexical.search

            def search(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202 - a spy
                hits = real_search(*args, **kwargs)
                found.append(len(hits))
                return hits

            monkeypatch.setattr(memory.lexical, "search", search)
            hits = memory.query(text="harbour Varnhagen", limit=5)
            assert hits[0].item.id == keeper
            assert found[0] == min(matched, 5 * 8)  # the first query's keyword hits


def test_rocchio_adds_the_document_at_three_quarters_and_normalises() -> None:
    query, document = [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]
    moved = rocchio(query, document)
    norm = math.hypot(1.0, ROCCHIO_BETA)
    assert moved == pytest.approx([1.0 / norm, ROCCHIO_BETA / norm, 0.0])
    assert rocchio([0.0, 0.0], [0.0, 0.0]) == [0.0, 0.0]
    with pytest.raises(ValueError):
        rocchio([1.0], [1.0, 0.0])


def test_a_rocchio_follow_up_embeds_the_question_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with AgentMemory("hops", tmp_path) as memory:
        first = memory.store("The Halvorsen Library was designed by the architect Mirela Oskarsdottir.")
        second = memory.store("Mirela Oskarsdottir grew up in Varnby, a town on the river Lune.")
        for n in range(6):
            memory.store(f"Library buildings of the 1930s, part {n}: reading rooms and tall windows.")
        memory.flush_index()
        stored = memory.index.chunk_vector(first, 0)
        assert stored is not None and math.fsum(x * x for x in stored) == pytest.approx(1.0, abs=1e-5)
        assert memory.index.chunk_vector("no-such-item", 0) is None
    question = "Which river flows by the home town of the Halvorsen Library's architect?"
    with AgentMemory("hops", tmp_path, config=MemoryConfig(multi_hop_vector="rocchio")) as memory:
        index_embedder(memory.config).clear()  # query vectors are cached process-wide: start from none
        embedder = index_embedder(memory.config).embedder
        embedded: list[list[str]] = []
        real_embed = embedder.embed
        monkeypatch.setattr(embedder, "embed", lambda texts: embedded.append(texts) or real_embed(texts))
        hits = [hit.item.id for hit in memory.query(text=question, limit=3)]
    assert embedded == [[question]]
    assert hits[0] == first and second in hits


def test_torch_threads_are_set_for_the_body_and_restored_after_the_last_one() -> None:
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    wanted = 2 if before == 1 else 1
    with torch_threads(None):
        assert torch.get_num_threads() == before
    with torch_threads(wanted):
        assert torch.get_num_threads() == wanted
        with torch_threads(wanted + 2):  # overlapping: the first one's number holds
            assert torch.get_num_threads() == wanted
        assert torch.get_num_threads() == wanted
    assert torch.get_num_threads() == before
    with pytest.raises(RuntimeError), torch_threads(wanted):
        raise RuntimeError("the body failed")
    assert torch.get_num_threads() == before


def test_a_query_is_embedded_with_the_configured_threads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    seen: list[int] = []
    before = torch.get_num_threads()
    wanted = 2 if before == 1 else 1
    config = MemoryConfig(embedding_runtime="torch", query_embedding_threads=wanted)  # torch's threads
    with AgentMemory("threads", tmp_path, config=config) as memory:
        memory.store("The harbour lighthouse was built in 1911.")
        memory.flush_index()
        embedder = index_embedder(memory.config).embedder
        real_embed = embedder.embed
        monkeypatch.setattr(embedder, "embed", lambda texts: seen.append(torch.get_num_threads()) or real_embed(texts))
        memory.store("A second note about the harbour.")  # indexing: torch's own setting
        memory.flush_index()
        memory.query(text="When was the lighthouse built?", limit=1)
    assert seen == [before, wanted]
    assert torch.get_num_threads() == before


def _long_text() -> str:
    """~8,000 characters of distinct sentences (no chunk a near-duplicate of another: each sentence
    names three goods of 60); the last one names a word found nowhere else."""
    towns = ["Brest", "Lyon", "Nantes", "Lille", "Rennes", "Dijon", "Tours", "Metz", "Caen", "Nancy"]
    goods = ("apples pears plums cherries leeks onions garlic carrots turnips beets cabbages kale honey cider "
             "butter cheese cream eggs bread flour oats barley rye wool linen hemp rope nails tin copper lace silk "
             "soap candles wax salt pepper saffron cloves ginger figs dates raisins almonds walnuts hazelnuts "
             "chestnuts trout herring oysters mussels eels pike carp lamb veal pork geese ducks hens").split()
    sentences = [f"Report {n}: the market of {towns[n % 10]} sold {goods[n * 7 % 60]}, {goods[(n * 13 + 5) % 60]} "
                 f"and {goods[(n * 29 + 11) % 60]} at {n * 7} stalls." for n in range(90)]
    return " ".join(sentences) + " Finally the quay of Varnbystrand was rebuilt in granite."


def test_text_past_the_embedding_budget_is_found_by_keyword_only(tmp_path: Path) -> None:
    memory = AgentMemory("a", tmp_path, config=MemoryConfig(max_embedded_chars=1_000))
    long_id = memory.store(_long_text(), title="market reports")
    memory.store("Tide tables for the harbour of Brest in June.", title="tides")
    memory.flush_index()  # the test reads the indexes directly
    lexical = memory.lexical
    assert lexical is not None
    every = [h for h in lexical.search("market", MemoryCriteria(text="market"), n_chunks=500) if h.item_id == long_id]
    assert len(every) > 5 and max(h.start_char for h in every) > 5_000  # all of it, for keywords
    query = index_embedder(memory.config).embed_query("market stalls")
    dense = [h for h in memory.index.search(query, MemoryCriteria(), n_chunks=500) if h.item_id == long_id]
    assert dense and all(h.start_char < 1_000 for h in dense)  # the head only, for meaning
    assert len(dense) < len(every)
    assert [h.item_id for h in lexical.search("Varnbystrand", MemoryCriteria(), n_chunks=5)] == [long_id]
    assert memory.query(text="quay of Varnbystrand granite", limit=1)[0].item.id == long_id

    dense_only = AgentMemory("b", tmp_path, config=MemoryConfig(max_embedded_chars=1_000, hybrid_search=False))
    whole_id = dense_only.store(_long_text())  # without a keyword index, all of it is embedded
    dense_only.flush_index()
    found = [h for h in dense_only.index.search(query, MemoryCriteria(), n_chunks=500) if h.item_id == whole_id]
    assert len(found) == len(every)


# -- what a query does not pay for, and what a flush of a large memory does not pay for -------------


def test_a_follow_up_no_chunk_holds_compiles_no_pattern(monkeypatch: pytest.MonkeyPatch) -> None:
    """A multi-hop follow-up is the question plus ~60 words of a chunk: no hit holds all of them,
    so no pattern is compiled for it (one took ~4 ms); a text a hit holds still leads."""
    import regex

    from agent_memory.index import fusion
    from agent_memory.storage.vector import ChunkHit

    compiled: list[str] = []
    real_compile = regex.compile

    def counting_compile(pattern: str, *args: object, **kwargs: object) -> object:
        compiled.append(pattern)
        return real_compile(pattern, *args, **kwargs)

    monkeypatch.setattr(fusion.regex, "compile", counting_compile)
    hits = [ChunkHit(item_id=f"item{n}", chunk_index=0, body=f"Day {n}: the heron nests in reeds beside the Straße.",
                     start_char=0, score=1.0) for n in range(40)]
    follow_up = "where does the heron nest " + " ".join(f"word{n}" for n in range(60))
    assert fusion.verbatim_matches(follow_up, hits) == {}
    assert compiled == []
    assert list(fusion.verbatim_matches("HERON nests in reeds", hits)) == [f"item{n}" for n in range(40)]
    assert set(fusion.verbatim_matches("beside the STRASSE", hits[:1])) == {"item0"}  # case-folded both sides
    assert fusion.verbatim_matches("nests in reed", hits) == {}  # whole words only
    assert len(compiled) == 3  # once per call that has a candidate, not once per hit


def test_a_query_of_a_memory_in_step_embeds_beside_the_keyword_search(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With nothing to wait for, the query's text is embedded inside the search (beside the keyword
    search, which runs in another thread); when the indexes may lag it is embedded first, so the
    wait for pending vectors counts from a ready model."""
    import agent_memory.memory as memory_module

    given: list[object] = []
    real_search = memory_module.search

    def recording_search(*args: object, **kwargs: object) -> object:
        given.append(kwargs["vector"])
        return real_search(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(memory_module, "search", recording_search)
    with AgentMemory("step", tmp_path, config=MemoryConfig(index_on_store=False)) as memory:
        memory.store("The heron nests in tall reeds beside the river.")
        memory.query("where do herons nest")  # stored since the indexes were last in step
        memory.query("where do herons breed")  # in step now
        bees = memory.store("Honeybees communicate food locations by dancing.")
        hits = memory.query("which insects dance")
    assert [vector is None for vector in given] == [False, True, False]
    assert hits[0].item.id == bees


class ListingCountingIndex:
    """A third party's vector index: the seven methods of the contract (no ``held_items``), over an
    in-process index, counting the listings of every item it is asked for."""

    def __init__(self) -> None:
        from agent_memory.storage.inprocess import InProcessVectorIndex

        self.inner = InProcessVectorIndex(MemoryConfig())
        self.listings = 0
        self.add, self.search, self.chunk_vector = self.inner.add, self.inner.search, self.inner.chunk_vector
        self.list_items, self.delete_items, self.reset = self.inner.list_items, self.inner.delete_items, self.inner.reset

    def item_ids(self) -> set[str]:
        self.listings += 1
        return self.inner.item_ids()


def test_a_flush_of_many_batches_lists_the_index_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each batch of a flush asks which of its items the index holds (another process may have
    indexed them): one lookup per item, or one ``held_items`` call, never a listing of the whole
    index per batch, which made building a 100k-item memory quadratic."""
    from agent_memory.index.upkeep import INDEX_BATCH_ITEMS

    texts = [f"Harbour log {n}: ship {n * 7919 % 997} berthed at quay {n % 13}." for n in range(INDEX_BATCH_ITEMS + 40)]
    third_party = ListingCountingIndex()
    with AgentMemory("batches", "memory://flush-batches", index=third_party,  # type: ignore[arg-type]
                     config=MemoryConfig(index_on_store=False)) as memory:
        ids = memory.store_many([{"content": text} for text in texts])
        assert memory.flush_index() == len(ids)
        assert third_party.listings <= 1  # the flush's own look at what is there: not one per batch
        assert third_party.inner.held_items(ids) == set(ids)
    with AgentMemory("built-in", "memory://flush-batches-2", config=MemoryConfig(index_on_store=False)) as memory:
        ids = memory.store_many([{"content": text} for text in texts])
        listings: list[int] = []
        real_item_ids = memory.index.item_ids
        monkeypatch.setattr(memory.index, "item_ids", lambda: listings.append(1) or real_item_ids())
        assert memory.flush_index() == len(ids)
        assert len(listings) <= 1
        assert memory.index.held_items(ids[:3] + ["mem_000000000000"]) == set(ids[:3])  # type: ignore[attr-defined]


@pytest.mark.parametrize("in_memory", [False, True], ids=["file", "memdb"])
def test_document_frequencies_are_looked_up_once_per_state_of_the_index(tmp_path: Path, in_memory: bool) -> None:
    """A term's document frequency is read from FTS5's vocabulary (a walk of its doclist) once,
    then kept until the index changes: by a write of this index object, or a commit of any other
    connection (another object, another process), which the next look sees."""
    if in_memory:
        first, keeper = LexicalIndex.in_memory(f"frequencies-{tmp_path.name}")
        second, _ = LexicalIndex.in_memory(f"frequencies-{tmp_path.name}")
    else:
        first, second = LexicalIndex(tmp_path / "f.sqlite3"), LexicalIndex(tmp_path / "f.sqlite3")
    first.add([chunk(n, f"The harbour log, day {n}.") for n in range(5)])
    statements: list[str] = []
    first._connect().set_trace_callback(statements.append)
    assert first.postings(["harbour", "day"]) == [("harbour", 5), ("day", 5)]
    assert sum("chunk_vocab" in sql for sql in statements) == 2
    statements.clear()
    assert first.postings(["harbour", "lighthouse"]) == [("harbour", 5), ("lighthouse", 0)]
    assert [sql for sql in statements if "chunk_vocab" in sql] == [
        "SELECT doc FROM temp.chunk_vocab WHERE term = 'lighthous'"]  # harbour was kept
    second.add([chunk(n, "A harbour lighthouse.") for n in range(5, 8)])  # another connection commits
    assert first.postings(["harbour", "lighthouse"]) == [("harbour", 8), ("lighthouse", 3)]
    first.add([chunk(9, "The harbour at night.")])  # this object writes
    assert first.postings(["harbour"]) == [("harbour", 9)]
    second.delete_items(["item9"])
    assert first.postings(["harbour"]) == [("harbour", 8)]
    first.close()
    second.close()
