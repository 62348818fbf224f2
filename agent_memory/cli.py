"""The ``agent-memory`` command: an agent's memory from a shell.

::

    agent-memory store report.html notes/ calls.jsonl          # files, directories, JSONL, "-" = stdin
    agent-memory query "whale strandings in New Zealand"       # best matching items first
    agent-memory retrieve mem_3f9a0c41b2de --around whale      # the text around a word
    agent-memory retrieve mem_3f9a0c41b2de --page 2            # the next 4,000 tokens
    agent-memory get mem_3f9a0c41b2de > page.html              # the content exactly as stored
    agent-memory list --type web_content                       # newest first
    agent-memory pin mem_3f9a0c41b2de                          # kept verbatim through compactions
    agent-memory forget mem_3f9a0c41b2de                       # deleted for good
    agent-memory stats                                         # items, bytes, tokens, by type
    agent-memory export memory.jsonl                           # every item with its content
    agent-memory import memory.jsonl --agent-id copy           # ... restored, ids kept
    agent-memory rebuild-index
    agent-memory serve-mcp --memory-dir ~/agent-memory --agent-id claude   # the memory tools over MCP (stdio)
    agent-memory migrate --from ./memory --to postgresql://me@db/memory  # files into Postgres (and back)
    agent-memory replay ../shared/data/traces --pages ../shared/data/webpages/readability  # token report
    agent-memory inspect ./memory --report replay-report                # a read-only web page on 127.0.0.1

``--memory-dir`` (or ``--backend`` with a ``postgresql://`` URL, or ``AGENT_MEMORY_URL``) and
``--agent-id`` choose the memory; every command that opens one takes them, before or after its name (``agent-memory --agent-id bot query ...`` and ``agent-memory query ...
--agent-id bot`` are the same; after the name wins). ``--agent`` is a deprecated spelling of
``--agent-id``, still accepted (hidden; a warning on stderr). Results are rich tables on a
terminal; ``--json`` prints JSON for scripts. Errors (an unknown id, a transform that does not
apply) print one line on stderr and exit with code 1; usage mistakes exit with code 2. Only
``store``, ``query``, ``rebuild-index``, ``import`` and ``replay`` (its ReAct check) load the
embedding model (``serve-mcp`` on its first store or query). ``forget``, ``pin`` and ``unpin`` go
through the agent's :class:`~agent_memory.kernel.manager.MemoryManager`, under the kernel lock MCP
servers take (:func:`agent_memory.kernel.lock.kernel_lock`), as the ``forget_memory`` and
``pin_memory`` tools do. ``replay`` lives in :mod:`agent_memory.replay.command`, the MCP server in
:mod:`agent_memory.mcp_server`.
"""

from __future__ import annotations

import functools
import inspect
import json
import os
import shlex
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar, cast

from agent_memory.extras import require_extra

require_extra("cli", "the agent-memory command")

import typer  # noqa: E402
from rich import box  # noqa: E402
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from agent_memory.config import (
    DEFAULT_QUERY_LIMIT,
    DEFAULT_RETRIEVE_MAX_TOKENS,
    MAX_QUERY_LIMIT,
    MAX_RETRIEVE_MAX_TOKENS,
    MemoryConfig,
)
from agent_memory.console import PROG, CliError
from agent_memory.console import fail as _fail
from agent_memory.console import reported_errors as _reported_errors
from agent_memory.console import stderr as _stderr
from agent_memory.console import stdout as _stdout
from agent_memory.errors import AgentMemoryError, ItemNotFoundError
from agent_memory.exports import export_lines, read_export
from agent_memory.fileio import atomic_write
from agent_memory.ids import validate_memory_id
from agent_memory.ingest import Source, plan_sources
from agent_memory.limits import shorten
from agent_memory.memory import DEFAULT_AGENT_ID, AgentMemory
from agent_memory.models.items import (
    MEMORY_TYPES,
    ItemMetadata,
    ItemRecord,
    MemoryCriteria,
    MemoryItem,
    MemorySnapshot,
    MemoryType,
    QueryHit,
    content_to_bytes,
)
from agent_memory.replay.command import replay
from agent_memory.stats import holds_anything, memory_stats
from agent_memory.storage import redacted_url
from agent_memory.transforms import PAGE_NOTICE_TOKENS

if TYPE_CHECKING:
    from agent_memory.kernel.manager import MemoryManager

__all__ = ["app"]

"""Name of the command, as printed in the next-page hint."""

DEFAULT_LIST_LIMIT = 20
"""Items ``list`` shows when no ``--limit`` is given."""

EXCERPT_CHARS = 160
"""Characters of the matching chunk shown per hit in the ``query`` table."""

TRANSFORMS = ("full", "excerpt", "first_n", "last_n", "filtered", "summary")
"""Transform names ``retrieve --transform`` accepts."""

MemoryDirOption = Annotated[Path | None, typer.Option(
    "--memory-dir", help="Base directory of the memory. Default: $AGENT_MEMORY_DIR, else ./memory.")]
"""``--memory-dir``, taken by the app and by every command that opens a memory."""

BackendOption = Annotated[str | None, typer.Option(
    "--backend", metavar="URL",
    help="Where the memory lives instead of a directory: a postgresql:// URL (shared by many machines). "
    "Default: $AGENT_MEMORY_URL, else --memory-dir.")]
"""``--backend``, taken by the app and by every command that opens a memory."""

AgentIdOption = Annotated[str | None, typer.Option(
    "--agent-id", help=f"Agent whose memory to use (a directory under agents/). Default: {DEFAULT_AGENT_ID!r}.")]
"""``--agent-id``, taken by the app and by every command that opens a memory."""

AgentAliasOption = Annotated[str | None, typer.Option("--agent", hidden=True, help="Deprecated: use --agent-id.")]
"""``--agent``: the old spelling of ``--agent-id``, kept (hidden) so existing scripts keep working."""

TypeFilter = Annotated[str | None, typer.Option(
    "--type", help=f"Only items of this type ({', '.join(MEMORY_TYPES)}).")]
"""``--type`` of ``query`` and ``list`` (checked by :func:`_check_type`); ``None``: every type."""

SourceFilter = Annotated[str | None, typer.Option("--source", help="Only items with exactly this source.")]
"""``--source`` of ``query`` and ``list``; ``None``: every source."""

TagFilter = Annotated[list[str], typer.Option("--tag", help="Only items with this tag; repeat to require several.")]
"""``--tag`` of ``query`` and ``list``; empty: no tag required."""


app = typer.Typer(
    name=PROG,
    help="Memory for LLM agents: store full results out of context, get them back by id or by meaning.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


# -- shared plumbing -------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _Globals:
    """Which memory the command opens, kept for commands and for the next-page hint."""

    memory_dir: Path | None = None
    """``--memory-dir``; ``None``: ``$AGENT_MEMORY_DIR``, else ``./memory`` (or ``backend``)."""
    agent_id: str = DEFAULT_AGENT_ID
    """``--agent-id`` (or ``--agent``), else the default agent."""
    backend: str | None = None
    """``--backend``; ``None``: ``$AGENT_MEMORY_URL``, else ``memory_dir``."""
    agent_named: bool = False
    """Whether ``--agent-id`` (or ``--agent``) was given, before the command or after it; ``False``:
    ``agent_id`` is the default, and ``inspect`` shows the agent with the most items."""

    def argv(self) -> list[str]:
        """The memory options as command-line words (only those that differ from the defaults; a
        database URL without its password)."""
        words: list[str] = []
        if self.memory_dir is not None:
            words += ["--memory-dir", str(self.memory_dir)]
        if self.backend is not None:
            words += ["--backend", redacted_url(self.backend)]
        if self.agent_id != DEFAULT_AGENT_ID:
            words += ["--agent-id", self.agent_id]
        return words


def _agent_id(agent_id: str | None, agent: str | None) -> str | None:
    """``--agent-id``, else the deprecated ``--agent`` (with a warning on stderr)."""
    if agent is not None:
        typer.echo("warning: --agent is deprecated; use --agent-id", err=True)
    return agent_id if agent_id is not None else agent


def _use(ctx: typer.Context, memory_dir: Path | None, backend: str | None, agent_id: str | None,
         agent: str | None) -> None:
    """Apply the memory options given at one level, the app's then the command's: each one given
    beats the one given before it (``ctx.obj``, a :class:`_Globals`)."""
    options: _Globals = ctx.obj if ctx.obj is not None else _Globals()
    chosen = _agent_id(agent_id, agent)
    ctx.obj = _Globals(memory_dir=memory_dir if memory_dir is not None else options.memory_dir,
                       agent_id=chosen if chosen is not None else options.agent_id,
                       backend=backend if backend is not None else options.backend,
                       agent_named=chosen is not None or options.agent_named)


_MEMORY_OPTIONS = tuple(
    inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=annotation)
    for name, annotation in (("memory_dir", MemoryDirOption), ("backend", BackendOption),
                             ("agent_id", AgentIdOption), ("agent", AgentAliasOption))
)
"""The memory options as parameters of a command's signature, in the order ``--help`` lists them."""

_Command = TypeVar("_Command", bound=Callable[..., None])


def _memory_options(command: _Command) -> _Command:
    """The command (or the app's callback), taking the memory options too: ``--memory-dir``,
    ``--backend``, ``--agent-id`` and the hidden ``--agent``, listed after its own options.

    They are applied (:func:`_use`) before its body runs, which reads the memory they choose from
    ``ctx.obj`` (a :class:`_Globals`); ``command`` must take ``ctx: typer.Context`` and none of the
    four. Typer reads a command's options from its signature (``inspect.signature``, which honours
    ``__signature__``), so the options are declared here once instead of in every command.
    """
    signature = inspect.signature(command, eval_str=True)  # typer reads __signature__ as it is

    @functools.wraps(command)
    def with_memory_options(**kwargs: Any) -> None:
        _use(kwargs["ctx"], *(kwargs.pop(option.name) for option in _MEMORY_OPTIONS))
        command(**kwargs)

    with_memory_options.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[*signature.parameters.values(), *_MEMORY_OPTIONS])
    return cast(_Command, with_memory_options)


def _check_type(type_: str | None) -> None:
    """Fail (exit code 1) unless ``type_`` (a ``--type``) is ``None`` or a memory type."""
    if type_ is not None and type_ not in MEMORY_TYPES:
        _fail(f"unknown type {type_!r}; choose one of {', '.join(MEMORY_TYPES)}")


def _offline_quiet_env() -> None:
    """Never reach for the network; keep library progress bars off the terminal; one BLAS thread
    (on 2 cores, after a threaded numpy product over ~1,400 all-MiniLM-L6-v2 vectors the next torch
    encode is ~11x slower: a dense query 7 ms → 84 ms)."""
    for name, value in {
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "OPENBLAS_NUM_THREADS": "1",
    }.items():
        os.environ.setdefault(name, value)


def _open(ctx: typer.Context, *, config: MemoryConfig | None = None) -> AgentMemory:
    options: _Globals = ctx.obj
    if options.backend is not None and options.memory_dir is not None:
        _fail("give --backend or --memory-dir, not both")
    return AgentMemory(options.agent_id, options.memory_dir, backend=options.backend, config=config)


MAX_LISTED_AGENTS = 20
"""Agent ids named at most when a command's agent has stored nothing."""


def _open_stored(ctx: typer.Context) -> AgentMemory:
    """The agent's memory for a command that reads it (``query``, ``list``, ``export``): when the
    agent has stored nothing there but others have, the command fails naming them, instead of
    answering "No items." for a mistyped ``--agent-id``. A memory where nothing is stored yet is
    no error (as for ``stats``): the command says so on stderr and exits 0."""
    memory = _open(ctx)
    agents = memory.backend.agent_ids()
    if memory.agent_id in agents:
        return memory
    where = redacted_url(memory.backend.url)
    if not agents:
        _stderr().print(f"Nothing is stored in {where} yet (agent {memory.agent_id!r} has no items); store "
                        "something first: agent-memory store FILE")
        return memory  # read as it is: empty
    memory.close()
    shown = ", ".join(agents[:MAX_LISTED_AGENTS]) + (f" and {len(agents) - MAX_LISTED_AGENTS:,} more"
                                                      if len(agents) > MAX_LISTED_AGENTS else "")
    _fail(f"agent {memory.agent_id!r} has stored nothing in {where}; agents there: {shown} "
          "(choose one with --agent-id)")


@contextmanager
def _kernel(memory: AgentMemory) -> Iterator[MemoryManager]:
    """The agent's conversation kernel, read from disk under the kernel lock (as an MCP server's
    forget and pin tools run), for the ``with`` block."""
    from agent_memory.kernel.lock import kernel_lock  # the kernel: only when needed
    from agent_memory.kernel.manager import MemoryManager

    with kernel_lock(memory):
        yield MemoryManager(memory)


def _tokens_cell(meta: ItemMetadata) -> str:
    """An item's size in tokens as a table shows it, in the memory tools' words: its text's when
    it is read as text (a page: ``3,551 as text (24,380 raw)``), else its own; ``…`` for a large
    result not counted yet."""
    if meta.tokens is None:
        return "…"
    if meta.text_tokens is not None and meta.text_tokens != meta.tokens:
        return f"{meta.text_tokens:,} as text ({meta.tokens:,} raw)"
    return f"{meta.tokens:,}"


def _label(record: ItemRecord) -> str:
    """The item's title, else its source (one table cell)."""
    return record.metadata.title or record.metadata.source


def _print_json(data: Any) -> None:
    typer.echo(json.dumps(data, ensure_ascii=False, indent=2))


@app.callback()
@_memory_options
def main(ctx: typer.Context) -> None:
    """Store, retrieve and query an agent's memory."""
    _offline_quiet_env()


@app.command()
@_memory_options
def store(
    ctx: typer.Context,
    paths: list[str] = typer.Argument(
        ...,
        metavar="PATH...",
        help="Files, directories (every file under them, recursively), .jsonl files (one item per line: "
        '{"content": ..., "type"?, "source"?, "tags"?, "title"?}, or any object, stored as JSON), or - for stdin.',
    ),
    type_: str | None = typer.Option(
        None, "--type", help=f"Item type: {', '.join(MEMORY_TYPES)}. Default: web_content for HTML, else file "
        "(custom for stdin and JSONL lines). A JSONL line's own type wins."
    ),
    source: str | None = typer.Option(None, "--source", help="Where the content came from. Default: the file path."),
    tags: list[str] = typer.Option([], "--tag", help="Label for filtering; repeat for several."),
    title: str | None = typer.Option(
        None, "--title", help="Title. Default: the page title for HTML, else the file name."
    ),
    index: bool = typer.Option(
        True, "--index/--no-index",
        help="Embed the new items now; --no-index leaves it to the next query (faster bulk loads).",
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Print only the new ids, one per line."),
    as_json: bool = typer.Option(False, "--json", help="Print the new items' records as JSON."),
) -> None:
    """Store files, directories, JSONL lines or stdin; print the new memory ids."""
    with _reported_errors():
        _check_type(type_)
        sources = plan_sources(paths, stdin=lambda: typer.get_binary_stream("stdin").read(),
                               warn=lambda text: _stderr().print(Text(f"warning: {text}", style="yellow")))
        memory = _open(ctx, config=MemoryConfig(index_on_store=False))
        records = _store_all(memory, sources, type_=type_, source=source, tags=tuple(tags), title=title,
                             show_progress=len(sources) > 1 and not quiet)
        index_error: AgentMemoryError | None = None
        if index and records:
            try:
                with _stderr().status(f"Indexing {len(records)} item(s)…"):
                    memory.flush_index()
            except AgentMemoryError as exc:
                index_error = exc
        if quiet:
            for record in records:
                typer.echo(record.id)
        elif as_json:
            _print_json([record.model_dump(mode="json") for record in records])
        else:
            _stdout().print(_records_table(records, title=f"Stored {len(records)} item(s)"))
        if index_error is not None:
            _fail(f"stored, but indexing failed ({index_error}); the items are indexed on the next query")


def _store_all(
    memory: AgentMemory,
    sources: list[Source],
    *,
    type_: str | None,
    source: str | None,
    tags: tuple[str, ...],
    title: str | None,
    show_progress: bool,
) -> list[ItemRecord]:
    """Store every source in order (a progress bar on stderr for bulk loads); their records."""
    ids: list[str] = []
    progress = Progress(
        TextColumn("Storing"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        TextColumn("{task.description}", style="dim"),
        console=_stderr(), disable=not show_progress,
    )
    with progress:
        task = progress.add_task("", total=len(sources))
        for item in sources:
            progress.update(task, description=item.label[-60:])
            try:
                payload = item.read()
                own = payload.own
                item_id = memory.store(
                    payload.content,
                    type=cast(MemoryType, own.get("type") or type_ or payload.default_type),
                    source=own.get("source") or source or payload.default_source,
                    tags=tags + payload.tags,
                    title=own.get("title") or title or payload.default_title,
                    media_type=payload.media_type,
                    extra=payload.extra,
                )
            except (AgentMemoryError, OSError, TypeError) as exc:
                done = f"; stored before it: {', '.join(ids)}" if ids else "; nothing was stored"
                raise CliError(f"{item.label}: {exc}{done}") from exc
            ids.append(item_id)
            progress.advance(task)
    by_id = {record.id: record for record in memory.records()}
    return [by_id[item_id] for item_id in ids]


def _records_table(records: list[ItemRecord], *, title: str | None = None, timestamps: bool = False) -> Table:
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, expand=True, pad_edge=False)
    table.add_column("id", no_wrap=True, min_width=16)
    if timestamps:
        table.add_column("stored (UTC)", no_wrap=True)
    table.add_column("type", no_wrap=True)
    table.add_column("tokens", justify="right", no_wrap=True)
    table.add_column("title / source", no_wrap=True, overflow="ellipsis", ratio=1)
    for record in records:
        row: list[Any] = [record.id]
        if timestamps:
            row.append(record.metadata.timestamp.strftime("%Y-%m-%d %H:%M"))
        row += [record.type, _tokens_cell(record.metadata), _label(record)]
        table.add_row(*row)
    return table


# -- retrieve --------------------------------------------------------------------------------------
_TRANSFORM_OPTIONS: dict[tuple[str, ...], tuple[str, ...]] = {
    ("excerpt",): ("start_char", "end_char", "start_line", "end_line", "around", "context_chars"),
    ("first_n", "last_n"): ("n", "unit"),
    ("filtered",): ("pattern", "keywords", "context_lines", "json_path", "column", "value"),
    ("summary",): ("summary_tokens",),
}
"""``retrieve``'s transform options (its parameter names, in its order) by the transforms they apply
to. Each sets the transform model's field of its own name, but those in :data:`_TRANSFORM_FIELDS`."""

_TRANSFORM_FIELDS = {"summary_tokens": "max_tokens"}
"""The transform options whose transform model field has another name than the option."""


def _build_transform(ctx: typer.Context, name: str | None,
                     given: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The transform dict for ``apply_transform`` and the same options as command-line words.

    ``given`` holds ``retrieve``'s transform options by parameter name; their command-line names
    are read from the command (``ctx``). Without ``--transform`` the transform follows from the
    options given (``--around`` means ``excerpt``, ``--pattern`` means ``filtered``, ``--n`` means
    ``first_n``), else ``full``.
    """
    applies_to = {key: transforms for transforms, keys in _TRANSFORM_OPTIONS.items() for key in keys}
    option = {param.name: param.opts[0] for param in ctx.command.params if param.name in applies_to}
    given = {key: given[key] for key in applies_to if given[key] not in (None, [], ())}
    if name is None:
        owners = [set(applies_to[key]) for key in given]
        common = set.intersection(*owners) if owners else {"full"}
        if not common:
            _fail(f"{', '.join(option[key] for key in given)} belong to different transforms; choose one with "
                  "--transform")
        name = next(t for t in TRANSFORMS if t in common)
    elif name not in TRANSFORMS:
        _fail(f"unknown transform {name!r}; choose one of {', '.join(TRANSFORMS)}")
    spec: dict[str, Any] = {"type": name}
    words = ["--transform", name] if given or name != "full" else []
    for key, value in given.items():
        if name not in applies_to[key]:
            _fail(f"{option[key]} does not apply to the {name} transform (it is for: {', '.join(applies_to[key])})")
        spec[_TRANSFORM_FIELDS.get(key, key)] = tuple(value) if isinstance(value, list) else value
        for one in value if isinstance(value, list) else [value]:
            words += [option[key], str(one)]
    return spec, words


def _page_line(page: int, pages: int, tokens: int, total_tokens: int, next_command: str | None) -> str:
    """The line printed under a cut answer: which page, and the command for the next one."""
    where = f"[page {page} of {pages}: {tokens:,} of {total_tokens:,} tokens"
    return where + (f"; next page: {next_command}]" if next_command else "; last page]")


@app.command()
@_memory_options
def retrieve(
    ctx: typer.Context,
    item_id: str = typer.Argument(..., metavar="ID", help="Memory id, e.g. mem_3f9a0c41b2de."),
    transform: str | None = typer.Option(
        None, "--transform", "-t",
        help=f"One of {', '.join(TRANSFORMS)}. Default: implied by the options below, else full.",
    ),
    start_char: int | None = typer.Option(None, help="excerpt: first character, 0-based.", min=0),
    end_char: int | None = typer.Option(None, help="excerpt: one past the last character.", min=0),
    start_line: int | None = typer.Option(None, help="excerpt: first line, 1-based.", min=1),
    end_line: int | None = typer.Option(None, help="excerpt: last line, 1-based, inclusive.", min=1),
    around: str | None = typer.Option(None, help="excerpt: every match of this text (case-insensitive) in context."),
    context_chars: int | None = typer.Option(None, help="excerpt: characters shown each side of --around (400).", min=0),
    n: int | None = typer.Option(None, "--n", help="first_n / last_n: how many lines or tokens (50).", min=1),
    unit: str | None = typer.Option(None, help="first_n / last_n: lines (default) or tokens."),
    pattern: str | None = typer.Option(None, help="filtered: keep lines matching this regex (case-insensitive)."),
    keywords: list[str] = typer.Option([], "--keyword", help="filtered: keep lines containing this word; repeatable."),
    context_lines: int | None = typer.Option(None, help="filtered: lines shown around each matching line (0).", min=0),
    json_path: str | None = typer.Option(None, help="filtered: dotted path into JSON, e.g. results.*.url."),
    column: str | None = typer.Option(None, help="filtered: keep rows whose COLUMN equals --value."),
    value: str | None = typer.Option(None, help="filtered: the value --column must equal (compared as text)."),
    summary_tokens: int | None = typer.Option(None, help="summary: length of the summary in tokens (400).", min=20),
    max_tokens: int = typer.Option(
        DEFAULT_RETRIEVE_MAX_TOKENS, "--max-tokens", min=120, max=MAX_RETRIEVE_MAX_TOKENS,
        help="Cap of the printed page, in o200k tokens; longer answers are paged.",
    ),
    page: int = typer.Option(1, "--page", min=1, help="Page to print, 1-based."),
    raw: bool = typer.Option(False, "--raw", help="Show HTML pages as markup instead of their main text."),
    as_json: bool = typer.Option(False, "--json", help="Print the result (content, pages, notes) as JSON."),
) -> None:
    """Print an item's content, shaped by a transform and capped at --max-tokens (paged)."""
    with _reported_errors():
        spec, words = _build_transform(ctx, transform, {
            "start_char": start_char, "end_char": end_char, "start_line": start_line, "end_line": end_line,
            "around": around, "context_chars": context_chars, "n": n, "unit": unit, "pattern": pattern,
            "keywords": keywords, "context_lines": context_lines, "json_path": json_path, "column": column,
            "value": value, "summary_tokens": summary_tokens,
        })
        argv = [PROG, *ctx.obj.argv(), "retrieve", item_id.strip().strip("'\"`"), *words]
        if max_tokens != DEFAULT_RETRIEVE_MAX_TOKENS:
            argv += ["--max-tokens", str(max_tokens)]
        if raw:
            argv.append("--raw")

        def next_command(page_no: int) -> str:
            return shlex.join([*argv, "--page", str(page_no)])

        # The page line must fit in --max-tokens with the page: the library keeps
        # PAGE_NOTICE_TOKENS free on a cut page; a longer line (a long --memory-dir) takes the rest
        # from the page. The budget depends only on the command line, so every page of an answer
        # is cut with the same budget, in text and in --json mode alike.
        memory = _open(ctx)
        widest = _page_line(99_999, 99_999, max_tokens, 99_999_999, next_command(100_000))
        overflow = max(0, memory.tokens.count(widest) + 2 - PAGE_NOTICE_TOKENS)
        budget = max(max_tokens - overflow, 2 * PAGE_NOTICE_TOKENS)
        result = memory.retrieve(item_id, spec, max_tokens=budget, page=page, raw=raw)
        following = next_command(result.page + 1) if result.truncated else None
        notes = [note + " (--raw gives the markup)" if note.startswith("HTML page") else note for note in result.notes]
        if as_json:
            data = result.model_dump(mode="json")
            _print_json({**data, "notes": notes, "max_tokens": max_tokens, "next_page_command": following})
            return
        for note in notes:
            _stderr().print(Text(f"note: {note}", style="dim"))
        typer.echo(result.content)
        if result.pages > 1:
            typer.echo("\n" + _page_line(result.page, result.pages, result.tokens, result.total_tokens, following))


# -- query and list --------------------------------------------------------------------------------
def _parse_time(value: str | None, option: str) -> datetime | None:
    if value is None:
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        raise typer.BadParameter(f"{value!r} is not an ISO date or time (e.g. 2025-01-31T12:00Z)",
                                 param_hint=option) from None


def _hits_table(hits: list[QueryHit], text: str | None) -> Table:
    heading = f"{len(hits)} item(s)" + (f" for {text!r}, best first" if text else ", newest first")
    table = Table(title=heading, title_justify="left", box=box.SIMPLE_HEAD, expand=True, pad_edge=False)
    table.add_column("id", no_wrap=True, min_width=16)
    table.add_column("match", justify="right", no_wrap=True)
    table.add_column("type", no_wrap=True)
    table.add_column("tokens", justify="right", no_wrap=True)
    table.add_column("title / source, then the matching excerpt", overflow="fold", ratio=1)
    for hit in hits:
        cell = Text(_label(hit.item), style="bold")
        if hit.chunk:
            cell.append("\n" + shorten(hit.chunk or '', EXCERPT_CHARS, one_line=True))
        table.add_row(
            hit.item.id,
            hit.match or "-",
            hit.item.type,
            _tokens_cell(hit.item.metadata),
            cell,
        )
    return table


@app.command()
@_memory_options
def query(
    ctx: typer.Context,
    text: str | None = typer.Argument(None, help="What to look for, in words. Omit to list by time, newest first."),
    type_: TypeFilter = None,
    source: SourceFilter = None,
    tags: TagFilter = [],  # typer passes every option: never this list
    since: str | None = typer.Option(None, "--since", help="Only items stored at or after this ISO time (naive = UTC)."),
    until: str | None = typer.Option(None, "--until", help="Only items stored at or before this ISO time (naive = UTC)."),
    limit: int = typer.Option(DEFAULT_QUERY_LIMIT, "--limit", min=1, max=MAX_QUERY_LIMIT, help="Most items shown."),
    as_json: bool = typer.Option(False, "--json", help="Print the hits as JSON."),
) -> None:
    """Find items by meaning and keywords (each item by its best chunk) and filters, best first.

    Each hit shows how well it matches, as the memory tools show it: the cosine similarity of its
    best chunk, or "keyword match" when only its keywords found it. --json also gives each hit's
    score, which only orders the hits of one query (reciprocal rank fusion of the dense and
    keyword rankings).
    """
    since_dt, until_dt = _parse_time(since, "--since"), _parse_time(until, "--until")
    with _reported_errors():
        if text is not None and not text.strip():
            _fail("the query text is empty; give words to look for, or leave TEXT out to list items newest first")
        _check_type(type_)
        criteria = MemoryCriteria(text=text, type=cast("MemoryType | None", type_), source=source, tags=tuple(tags),
                                  since=since_dt, until=until_dt, limit=limit)
        memory = _open_stored(ctx)
        with _stderr().status("Searching…"):
            hits: list[QueryHit] = memory.query(criteria)
        if as_json:
            _print_json([hit.model_dump(mode="json") for hit in hits])
        elif not hits:
            _stderr().print("No matching items.")
        else:
            _stdout().print(_hits_table(hits, criteria.text))


@app.command("list")
@_memory_options
def list_items(
    ctx: typer.Context,
    type_: TypeFilter = None,
    source: SourceFilter = None,
    tags: TagFilter = [],  # typer passes every option: never this list
    limit: int = typer.Option(DEFAULT_LIST_LIMIT, "--limit", min=1, help="Most items shown."),
    as_json: bool = typer.Option(False, "--json", help="Print the records as JSON."),
) -> None:
    """List stored items, newest first (reads items.jsonl; no index needed)."""
    with _reported_errors():
        _check_type(type_)
        wanted_tags = {tag.strip().lower() for tag in tags if tag.strip()}
        records = [
            record for record in _open_stored(ctx).records()
            if (type_ is None or record.type == type_)
            and (source is None or record.metadata.source == source)
            and wanted_tags <= set(record.metadata.tags)
        ]
        # Newest first; equal timestamps keep the file's order reversed (later lines first).
        records = sorted(reversed(records), key=lambda record: record.metadata.timestamp, reverse=True)[:limit]
        if as_json:
            _print_json([record.model_dump(mode="json") for record in records])
        elif not records:
            _stderr().print("No items.")
        else:
            _stdout().print(_records_table(records, title=f"{len(records)} item(s), newest first", timestamps=True))


# -- one item: get, forget, pin -----------------------------------------------------------------
@app.command()
@_memory_options
def get(
    ctx: typer.Context,
    item_id: str = typer.Argument(..., metavar="ID", help="Memory id, e.g. mem_3f9a0c41b2de."),
    as_json: bool = typer.Option(False, "--json", help="Print the item's record (id, type, metadata) as JSON "
                                 "instead of its content."),
) -> None:
    """Write an item's content to stdout exactly as stored: text as UTF-8, bytes as they are, JSON
    as its stored document; nothing added (no newline, no cap; `retrieve` shapes and pages)."""
    with _reported_errors():
        item = _open(ctx).get(item_id)
        if as_json:
            _print_json(item.record.model_dump(mode="json"))
            return
        data, _ = content_to_bytes(item.content, item.metadata.content_encoding)
        stdout = typer.get_binary_stream("stdout")
        stdout.write(data)
        stdout.flush()


def _checked_ids(memory: AgentMemory, item_ids: list[str]) -> list[str]:
    """The ids, each valid and stored (``InvalidIdError`` / ``ItemNotFoundError`` otherwise), so
    that a typo in the third id changes nothing."""
    checked = [validate_memory_id(item_id) for item_id in item_ids]
    for item_id in checked:
        if item_id not in memory:
            raise ItemNotFoundError(f"no memory item {item_id!r}; nothing was changed", item_id=item_id)
    return checked


@app.command()
@_memory_options
def forget(
    ctx: typer.Context,
    item_ids: list[str] = typer.Argument(..., metavar="ID...", help="Memory ids to delete."),
) -> None:
    """Delete items for good (record, content, index entries) and take them out of the agent's
    conversation, as the forget_memory tool does. Every id must exist, or nothing is deleted."""
    with _reported_errors():
        memory = _open(ctx)
        checked = _checked_ids(memory, item_ids)
        with _kernel(memory) as manager:
            for item_id in checked:
                manager.forget(item_id)
                typer.echo(f"Forgot {item_id}.")


@app.command()
@_memory_options
def pin(
    ctx: typer.Context,
    item_ids: list[str] = typer.Argument(None, metavar="[ID...]",
                                         help="Memory ids to pin. None: list the pinned items."),
    as_json: bool = typer.Option(False, "--json", help="Print the pinned ids as a JSON list."),
) -> None:
    """Pin items: every compaction of the agent's conversation keeps them verbatim (as the
    pin_memory tool does); without ids, list the pinned items, in pinning order."""
    with _reported_errors():
        memory = _open(ctx)
        checked = _checked_ids(memory, item_ids or [])
        with _kernel(memory) as manager:
            for item_id in checked:
                manager.pin_item(item_id)
            pinned = list(manager.pinned_items)
        if as_json:
            _print_json(pinned)
        elif checked:
            typer.echo("\n".join(f"Pinned {item_id}." for item_id in checked))
        else:
            typer.echo("\n".join(pinned) if pinned else "No pinned items.")


@app.command()
@_memory_options
def unpin(
    ctx: typer.Context,
    item_ids: list[str] = typer.Argument(..., metavar="ID...", help="Pinned memory ids."),
) -> None:
    """Unpin items: compactions summarize them like the rest again. An id that was not pinned is
    an error (exit code 1), after the others are unpinned."""
    with _reported_errors():
        memory = _open(ctx)
        checked = [validate_memory_id(item_id) for item_id in item_ids]
        with _kernel(memory) as manager:
            missing = [item_id for item_id in checked if not manager.unpin_item(item_id)]
        for item_id in checked:
            if item_id not in missing:
                typer.echo(f"Unpinned {item_id}.")
        if missing:
            _fail(f"not pinned: {', '.join(missing)} (`{PROG} pin` lists the pinned items)")


# -- the whole memory: stats, export, import ---------------------------------------------------------
@app.command()
@_memory_options
def stats(
    ctx: typer.Context,
    as_json: bool = typer.Option(False, "--json", help="Print the figures as JSON."),
) -> None:
    """What the memory holds: items, content bytes and tokens in total and by type, items not
    yet indexed (embedded by the next query), pinned items, tags, dates and disk use."""
    with _reported_errors():
        memory = _open(ctx)
        pinned: tuple[str, ...] = ()
        if holds_anything(memory):
            with _kernel(memory) as manager:
                pinned = manager.pinned_items
        data = memory_stats(memory, pinned_items=pinned).model_dump(mode="json")
    if as_json:
        _print_json(data)
        return
    table = Table(title=f"Memory of agent {data['agent_id']!r}", title_justify="left",
                  box=box.SIMPLE_HEAD, pad_edge=False)
    for column in ("type", "items", "content bytes", "tokens"):
        table.add_column(column, justify="left" if column == "type" else "right", no_wrap=True)
    for kind, row in data["by_type"].items():
        table.add_row(kind, f"{row['items']:,}", f"{row['size_bytes']:,}", f"{row['tokens']:,}")
    table.add_row("all", f"{data['items']:,}", f"{data['size_bytes']:,}", f"{data['tokens']:,}", style="bold")
    console = _stdout()
    console.print(table)
    pending = "unknown (the index cannot be opened)" if data["pending_index"] is None else f"{data['pending_index']:,}"
    lines = [
        f"directory: {data['path']}",
        f"not yet indexed: {pending}",
        f"pinned: {', '.join(data['pinned_items']) or 'none'}",
        f"tags: {', '.join(f'{tag} ({n})' for tag, n in data['top_tags'].items()) or 'none'}",
        f"stored: {data['oldest'] or '-'} … {data['newest'] or '-'}",
        f"on disk: {data['disk_bytes']:,} bytes (content, records, indexes, conversation)",
    ]
    console.print(Text("\n".join(lines)))


EXPORT_HELP = ("Every item with its content, one JSON object per line, oldest first, in the form a "
               "MemorySnapshot holds its items (bytes as base64; metadata.content_encoding says how to read "
               "the content back).")


@app.command()
@_memory_options
def export(
    ctx: typer.Context,
    out: str = typer.Argument("-", metavar="FILE", help="The JSONL file to write ('-', the default: stdout)."),
) -> None:
    """Write every item with its content as JSONL, restorable with `import`. The file is written
    atomically (complete or not at all)."""
    with _reported_errors():
        memory = _open_stored(ctx)
        count = len(memory.records())
        if out == "-":
            stream = typer.get_binary_stream("stdout")
            for line in export_lines(memory):
                stream.write(line)
            stream.flush()
            return
        atomic_write(Path(out), export_lines(memory))
        _stderr().print(f"Exported {count:,} item(s) to {out}.")


@app.command("import")
@_memory_options
def import_items(
    ctx: typer.Context,
    source: str = typer.Argument(..., metavar="FILE", help="A file `export` wrote (or MemorySnapshot.save); "
                                 "'-' for stdin."),
    replace: bool = typer.Option(False, "--replace", help="Make the memory hold exactly the file's items "
                                 "(its present items are removed). Default: add them beside the present ones."),
) -> None:
    """Restore exported items: ids, metadata and content as they were (each content checked
    against its sha256), then index them. All or nothing: an id already in the memory (without
    --replace) or a bad line imports nothing."""
    with _reported_errors():
        data = typer.get_binary_stream("stdin").read() if source == "-" else Path(source).read_bytes()
        imported = read_export(data, source=source)
        memory = _open(ctx)
        kept: list[MemoryItem] = []
        if not replace:
            present = [record.id for record in memory.own_records()]  # oldest first, as restore keeps them
            clash = sorted({item.id for item in imported} & set(present))
            if clash:
                _fail(f"{len(clash)} of the items are in the memory already ({', '.join(clash[:3])}"
                      f"{', …' if len(clash) > 3 else ''}); nothing was imported. Use --replace to make the memory "
                      "hold exactly the file's items, or import into another --agent-id.")
            kept = [memory.get(item_id) for item_id in present]
        with _stderr().status(f"Importing and indexing {len(imported):,} item(s)…"):
            memory.restore(MemorySnapshot(agent_id=memory.agent_id, items=(*kept, *imported)))
        typer.echo(f"Imported {len(imported):,} item(s); the memory holds {len(memory.own_records()):,}.")


@app.command("rebuild-index")
@_memory_options
def rebuild_index(
    ctx: typer.Context,
) -> None:
    """Drop the vector index and rebuild it from items.jsonl; print how many items were indexed."""
    with _reported_errors():
        memory = _open(ctx)
        with _stderr().status(f"Re-indexing {len(memory)} item(s)…"):
            count = memory.rebuild_index()
        typer.echo(f"Indexed {count} item(s).")


@app.command()
def migrate(
    source: str = typer.Option(..., "--from", metavar="STORE", help="Where the memory is: a memory directory or a "
                               "postgresql:// URL."),
    target: str = typer.Option(..., "--to", metavar="STORE", help="Where it goes: a memory directory or a "
                               "postgresql:// URL."),
    only: list[str] = typer.Option([], "--only", metavar="AGENT_ID", help="Copy this agent only; repeat for "
                                   "several. Default: every agent the source holds."),
    no_index: bool = typer.Option(False, "--no-index", help="Do not build the target's indexes now (the first "
                                  "query builds them)."),
    as_json: bool = typer.Option(False, "--json", help="Print what was copied as JSON."),
) -> None:
    """Copy memory between stores, byte for byte: a memory directory into Postgres, or back. Every item
    (records and content), trace, working context and fork of each agent; the target's indexes are
    built again (embedding). Agents the target holds already, or with events not applied yet, are refused."""
    from agent_memory.migrate import AgentCopy
    from agent_memory.migrate import migrate as copy_memory
    from agent_memory.storage import open_backend

    with _reported_errors():
        source_backend, target_backend = open_backend(source), open_backend(target)
        done: list[AgentCopy] = []
        with _stderr().status("Copying…") as status:
            def report(copy: AgentCopy) -> None:
                done.append(copy)
                status.update(f"Copied {len(done)} agent(s)…")

            copy_memory(source_backend, target_backend, only or None, index=not no_index, progress=report)
        if as_json:
            _print_json([vars(copy) for copy in done])
            return
        table = Table(box=box.SIMPLE_HEAD)
        for column in ("agent", "items", "blobs", "traces", "documents", "indexed"):
            table.add_column(column, justify="left" if column in ("agent", "documents") else "right")
        for copy in done:
            table.add_row(copy.agent_id, f"{copy.items:,}", f"{copy.blobs:,}", f"{sum(copy.traces.values()):,}",
                          ", ".join(copy.documents) or "-", f"{copy.indexed:,}")
        _stdout().print(table)
        typer.echo(f"Copied {len(done)} agent(s) from {source_backend.url} to {target_backend.url}.")


@app.command("serve-mcp")
@_memory_options
def serve_mcp(
    ctx: typer.Context,
    allow_read: Path | None = typer.Option(
        None, "--allow-read", metavar="DIR", exists=True, file_okay=False, dir_okay=True, resolve_path=True,
        help="A directory whose files store_memory may store by path (symlinks are resolved; nothing outside it "
        "is read). Default: none; the tools read no files (text comes as content, in parts when long).",
    ),
) -> None:
    """Serve the memory tools (store, retrieve, query, compact, forget, pin) over MCP on stdin/stdout,
    for Claude Desktop, Claude Code, Cursor or an agent's MCP client. Logs go to stderr."""
    from agent_memory.mcp_server import serve_mcp as serve

    options: _Globals = ctx.obj
    with _reported_errors():
        serve(options.memory_dir, options.agent_id, allow_read=allow_read, backend=options.backend)



# -- inspect: the read-only web page (agent_memory.inspector) ---------------------------------------
@app.command("inspect")
@_memory_options
def inspect_memory(
    ctx: typer.Context,
    target: str | None = typer.Argument(
        None, metavar="[BACKEND]", help="A memory directory or a postgresql:// URL. Default: --backend / --memory-dir, "
        "else $AGENT_MEMORY_URL, else $AGENT_MEMORY_DIR, else ./memory."),
    report: Path | None = typer.Option(
        None, "--report", metavar="DIR", exists=True, file_okay=False, dir_okay=True, resolve_path=True,
        help="A replay report directory (agent-memory replay --out DIR): its tables and plots get a page."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on; loopback only unless --allow-remote."),
    port: int = typer.Option(8766, "--port", min=0, max=65535, help="TCP port (0: a free one)."),
    allow_remote: bool = typer.Option(False, "--allow-remote", help="Allow a non-loopback --host (e.g. 0.0.0.0): "
                                      "anyone who reaches the port reads the whole memory."),
    price_model: str = typer.Option("claude-sonnet-4-6", "--price-model", metavar="MODEL",
                                    help="Price the rebuilt calls under this model (genai-prices id); 'none': "
                                    "tokens only."),
) -> None:
    """Serve a read-only web page over a memory: items (Query Memory, filters, one item's citation
    and content), each conversation's LLM calls (what each result looked like to the model, tokens,
    cost, prompt versions, compactions), sub-agents and their scopes, and a replay report's plots. Pages show
    the --agent-id agent, else the one with the most items. Nothing is written to the memory. Stop
    it with Ctrl-C."""
    from agent_memory.inspector import Inspector, InspectorServer, check_bind_host
    from agent_memory.pricing import PriceModel
    from agent_memory.storage.urls import checked_url

    options: _Globals = ctx.obj
    with _reported_errors():
        check_bind_host(host, allow_remote=allow_remote)  # before anything is opened
        given = [value for value in (target, options.backend, options.memory_dir) if value is not None]
        if len(given) > 1:
            _fail("give one backend: BACKEND, --backend or --memory-dir")
        chosen: str | None = str(given[0]) if given else None
        scheme = checked_url(chosen) if chosen is not None else None  # a URL of another scheme opens as it says
        if chosen is not None and scheme in (None, "file") and \
                not Path(chosen.strip()[len("file://"):] if scheme else chosen).is_dir():
            _fail(f"no memory directory at {chosen}")
        prices = None if price_model.strip().lower() == "none" else PriceModel.lookup(price_model)
        # --agent-id (here or before the command) names the agent a page shows when it names none;
        # without it, the agent with the most items of its own (Inspector.busiest_agent).
        inspector = Inspector(chosen, agent_id=options.agent_id if options.agent_named else None, report_dir=report,
                              price_model=prices)
        if options.agent_named and options.agent_id not in inspector.agents():
            typer.echo(f"warning: no agent {options.agent_id!r} in this backend (yet): its pages say so; the "
                       "agents page lists those there are", err=True)
        server = InspectorServer(inspector, host=host, port=port, allow_remote=allow_remote)
        typer.echo(f"Inspecting {inspector.backend.url} (read-only) at {server.url} (Ctrl-C stops it)", err=True)
        server.serve()


app.command()(replay)

if __name__ == "__main__":  # pragma: no cover
    app()
