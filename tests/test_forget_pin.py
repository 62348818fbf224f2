"""Forget and pin (team9's MEMORY_FORGET / MEMORY_MARK_CRITICAL events), as API and as memory actions,
on real files and the real embedded index."""

from __future__ import annotations

import json
from pathlib import Path

from actions import MemoryToolkit
from agent_memory import AgentMemory, ItemNotFoundError, MemoryConfig, Message, ToolCall
from agent_memory.kernel.budget import ModelLimits
from agent_memory.kernel.manager import MemoryManager
from agent_memory.presentation.context import FORGOTTEN_NOTE
from agent_memory.presentation.offer import OfferState, ToolOffer

import pytest


def test_forget_removes_record_index_entries_and_content(embedded_memory: AgentMemory) -> None:
    memory = embedded_memory
    secret = memory.store("The launch code of the orbital platform is 7-7-alpha.", title="launch code")
    kept = memory.store("Tide tables for the harbour of Brest in June.", title="tides")
    digest = memory.get(secret).metadata.content_sha256
    assert [h.item.id for h in memory.query(text="orbital launch code", limit=1)] == [secret]

    assert memory.forget(secret) is True
    assert secret not in memory and kept in memory
    assert not (memory.path / "content" / digest).exists()
    assert secret not in memory.index.item_ids()
    assert secret not in {h.item.id for h in memory.query(text="orbital launch code")}
    assert "7-7-alpha" not in (memory.path / "items.jsonl").read_text(encoding="utf-8")
    with pytest.raises(ItemNotFoundError):
        memory.get(secret)
    assert memory.forget(secret) is False  # idempotent
    reopened = AgentMemory(memory.agent_id, memory.memory_dir)
    assert secret not in reopened and kept in reopened


def test_forget_keeps_content_another_item_shares(tmp_path: Path) -> None:
    memory = AgentMemory("a", tmp_path, config=MemoryConfig(index_on_store=False))
    first = memory.store("same bytes", title="one")
    second = memory.store("same bytes", title="two")
    memory.forget(first)
    assert memory.get(second).content == "same bytes"


def _manager(tmp_path: Path) -> MemoryManager:
    memory = AgentMemory("k", tmp_path, config=MemoryConfig(index_on_store=False))
    limits = ModelLimits(max_context_tokens=50_000, max_output_tokens=1_000, safety_margin_tokens=0)
    return MemoryManager(memory, system_prompt="sys", limits=limits)


def test_forget_leaves_the_conversation_with_a_note(tmp_path: Path) -> None:
    manager = _manager(tmp_path)
    manager.ingest_user_message("fetch the page")
    manager.ingest_assistant_response(Message(role="assistant", tool_calls=(ToolCall(id="c1", name="fetch", input={}),)))
    ref = manager.ingest_tool_result("c1", "SECRET-TOKEN-123 and the rest of the page " * 5)
    assert ref is not None
    assert "SECRET-TOKEN-123" in manager.build_prompt().messages[-1].content
    manager.pin_item(ref)

    toolkit = MemoryToolkit(manager.memory, manager=manager)
    result = toolkit.dispatch("forget_memory", {"id": ref})
    assert result.ok, result.content
    shown = manager.build_prompt().messages[-1]
    assert shown.role == "tool" and shown.content == FORGOTTEN_NOTE.format(id=ref)
    assert ref not in manager.pinned_items
    for name in ("raw_traces.jsonl",):
        assert "SECRET-TOKEN-123" not in (manager.memory.path / name).read_text(encoding="utf-8")
    again = toolkit.dispatch("forget_memory", json.dumps({"id": ref}))
    assert not again.ok and "nothing was deleted" in again.content
    # a restarted kernel shows the same note (the working context holds the reference only)
    restarted = MemoryManager(AgentMemory("k", tmp_path, config=MemoryConfig(index_on_store=False)), system_prompt="sys")
    assert restarted.build_prompt().messages[-1].content == FORGOTTEN_NOTE.format(id=ref)


def test_pin_action_pins_items_and_facts_through_compaction(tmp_path: Path) -> None:
    manager = _manager(tmp_path)
    toolkit = MemoryToolkit(manager.memory, manager=manager, offer=ToolOffer(always=frozenset({"pin", "forget"})))
    assert {"pin_memory", "forget_memory"} <= {t["function"]["name"] for t in toolkit.tool_definitions(OfferState())}
    plain = MemoryToolkit(manager.memory, manager=manager)
    assert "pin_memory" not in {t["function"]["name"] for t in plain.tool_definitions(OfferState())}

    note = manager.memory.store("Budget ceiling: 12,000 EUR, approved by Ana.", title="budget")
    assert toolkit.dispatch("pin_memory", {"id": note}).ok
    fact = toolkit.dispatch("pin_memory", {"fact": "Answers must be in French."})
    assert fact.ok
    bad = toolkit.dispatch("pin_memory", {"id": note, "fact": "x"})
    assert not bad.ok and "not both" in bad.content
    unknown = toolkit.dispatch("pin_memory", {"id": "mem_0123456789ab"})
    assert not unknown.ok

    for n in range(1, 8):
        manager.ingest_user_message(f"question {n}: " + "words " * 50)
        manager.ingest_assistant_response(f"answer {n}")
    manager.request_compaction()
    record = manager.compact()
    assert record.turn_ids  # something was compacted
    system = "\n".join(m.content or "" for m in manager.build_prompt().messages if m.role == "system")
    assert "12,000 EUR" in system and "Answers must be in French." in system


def test_forget_redacts_the_compacted_turns_that_quoted_the_result(tmp_path: Path) -> None:
    """A compacted turn is stored in memory (searchable, ``retrieve_memory(id="turn_…")``) with
    the result's preview in it: forgetting the result rewrites that item too, in the store and in
    both indexes, and a retried forget changes nothing more."""
    memory = AgentMemory("k", tmp_path)
    limits = ModelLimits(max_context_tokens=50_000, max_output_tokens=1_000, safety_margin_tokens=0)
    manager = MemoryManager(memory, system_prompt="sys", limits=limits, tail_turns=1)
    manager.ingest_user_message("fetch the dossier of the orbital platform")
    manager.ingest_assistant_response(Message(role="assistant", tool_calls=(ToolCall(id="c1", name="fetch", input={}),)))
    ref = manager.ingest_tool_result("c1", "Launch code ZEBRA-7731-KILO for the orbital platform.\nSecond line.\n" * 3)
    manager.ingest_assistant_response("I read the dossier.")
    for i in range(3):
        manager.ingest_user_message(f"question {i} about tides in Brest")
        manager.ingest_assistant_response(f"answer {i}")
    manager.compact()
    turns = [r.id for r in memory.records() if r.type == "conversation_turn"]
    quoting = [item_id for item_id in turns if "ZEBRA-7731-KILO" in memory.get(item_id).content]
    assert quoting, "the compacted turn quotes the preview (else this test tests nothing)"
    unrelated = {item_id: memory.get(item_id).content for item_id in turns if item_id not in quoting}

    assert manager.forget(ref) is True
    for record in memory.records():
        assert "ZEBRA-7731-KILO" not in str(memory.get(record.id).content), record.type
    for item_id in quoting:
        text = memory.get(item_id).content
        assert FORGOTTEN_NOTE.format(id=ref) in text and "Second line." not in text
        assert text.startswith("Turn 1:") and "User: fetch the dossier" in text and "Assistant: I read" in text
    assert {item_id: memory.get(item_id).content for item_id in unrelated} == unrelated
    for hit in memory.query(text="launch code ZEBRA-7731-KILO orbital platform", limit=10):
        assert "ZEBRA-7731-KILO" not in (hit.chunk or "")
    assert memory.lexical is not None and memory.lexical.postings(["zebra"]) == [("zebra", 0)]
    shown = MemoryToolkit(memory, manager=manager).dispatch("retrieve_memory", {"id": "turn_0001"})
    assert shown.ok and "ZEBRA" not in shown.content and FORGOTTEN_NOTE.format(id=ref) in shown.content
    rewritten = {item_id: memory.get(item_id).metadata.content_sha256 for item_id in quoting}
    assert manager.forget(ref) is False  # a retry: nothing left to rewrite
    assert {item_id: memory.get(item_id).metadata.content_sha256 for item_id in quoting} == rewritten


def test_rewrite_replaces_content_in_store_and_indexes_and_keeps_the_rest(tmp_path: Path) -> None:
    memory = AgentMemory("a", tmp_path)
    item_id = memory.store("The harbour master of Brest is Yann Le Gall.", title="harbour", tags=["port"],
                           type="search_results", source="search")
    other = memory.store("Tide tables for the harbour of Brest in June.", title="tides")
    before = memory.get(item_id)
    old_blob = memory.path / "content" / before.metadata.content_sha256

    memory.rewrite(item_id, "The harbour master of Brest is [removed].")
    after = memory.get(item_id)
    assert after.content == "The harbour master of Brest is [removed]."
    assert (after.type, after.metadata.title, after.metadata.tags, after.metadata.source) == (
        "search_results", "harbour", ("port",), "search")
    assert after.metadata.timestamp == before.metadata.timestamp
    assert after.metadata.content_sha256 != before.metadata.content_sha256 and not old_blob.exists()
    assert [r.id for r in memory.records()] == [item_id, other]  # same place, same id
    for hit in memory.query(text="Yann Le Gall harbour master", limit=5):
        assert "Yann" not in (hit.chunk or "")
    reopened = AgentMemory("a", tmp_path)
    assert reopened.get(item_id).content == after.content
    reopened.rebuild_index()
    assert reopened.query(text="harbour master", limit=1)[0].item.id == item_id


def test_rewrite_drops_related_ids_of_items_forgotten_since(tmp_path: Path) -> None:
    memory = AgentMemory("a", tmp_path, config=MemoryConfig(index_on_store=False))
    source = memory.store("the page", title="page")
    kept = memory.store("another page", title="kept")
    note = memory.store("a note on the page", related_to=[source, kept])
    memory.forget(source)
    memory.rewrite(note, "a note on a forgotten page")
    assert memory.get(note).metadata.related_to == (kept,)
    assert memory.get(note).content == "a note on a forgotten page"


def test_pins_from_two_managers_on_one_agent_are_merged_not_overwritten(tmp_path: Path) -> None:
    """An MCP server or a second manager pins on the same agent while a long-lived manager runs:
    neither side's pin or unpin is lost when the other saves its working context."""
    first = _manager(tmp_path)
    ids = [first.memory.store(f"fact number {n}", title=f"fact {n}") for n in range(4)]
    first.pin_item(ids[0])
    first.pin_item(ids[1])
    second = _manager(tmp_path)  # opened now: sees ids 0 and 1
    assert second.pinned_items == (ids[0], ids[1])

    second.pin_item(ids[2])
    second.unpin_item(ids[0])
    first.ingest_user_message("a new turn")  # the long-lived manager saves checkpoints meanwhile
    first.context.commit_presentation(first.context.presentation)
    assert first.pinned_items == (ids[1], ids[2])  # it sees the other's pin and unpin

    first.pin_item(ids[3])
    assert second.pinned_items == (ids[1], ids[2], ids[3])
    assert _manager(tmp_path).pinned_items == (ids[1], ids[2], ids[3])  # and so does the file
    first.compact()  # the compaction snapshot shows the merged pins verbatim
    shown = "\n".join(str(m.content) for m in first.build_prompt().messages)
    assert "fact number 2" in shown and "fact number 3" in shown and "fact number 0" not in shown
