"""The click wiring of the ``sessions`` command: options, help texts and error handling.

Each command imports its module when it runs, so one command (``sessions mcp`` as an MCP
client starts it) loads nothing of the others."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from .store import BadInput, StoreHandle, error_for, one_line

if TYPE_CHECKING:  # pragma: no cover
    import click

DEFAULT_STORE = "./sessions.db"


def build_cli() -> click.Group:
    """The click command group (imports click)."""
    import click

    class Group(click.Group):
        def invoke(self, ctx: click.Context) -> Any:
            try:
                return super().invoke(ctx)
            except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
                raise
            except BrokenPipeError:
                raise
            except Exception as error:
                handle = ctx.obj if isinstance(ctx.obj, StoreHandle) else None
                if handle is not None and handle.debug:
                    raise
                message, code = error_for(error, handle)
                failure = click.ClickException(one_line(message))
                # click declares exit_code a ClassVar, yet reads it from the instance (self.exit_code)
                failure.exit_code = code  # pyright: ignore[reportAttributeAccessIssue]
                raise failure from None

    width_option = click.option(
        "--width", type=click.IntRange(10, 2000), default=80, show_default=True, help="Characters of each preview."
    )

    @click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
    @click.option(
        "--store",
        "store_url",
        envvar="SESSIONS_STORE",
        default=DEFAULT_STORE,
        metavar="URL",
        help="A SQLite file path or a PostgreSQL URL (default: $SESSIONS_STORE, else ./sessions.db).",
    )
    @click.option(
        "--schema", default=None, metavar="NAME", help="The PostgreSQL schema holding the tables (default: public)."
    )
    @click.option("--debug", is_flag=True, hidden=True, help="Show tracebacks.")
    @click.version_option(package_name="session-memory", prog_name="sessions", message="%(prog)s %(version)s")
    @click.pass_context
    def cli(ctx: click.Context, store_url: str, schema: str | None, debug: bool) -> None:
        """Inspect, search, export and import session-memory stores.

        SESSION is a storage session id: what Session.for_session takes, "namespace:id" for a
        session of a SessionManager with a namespace. Exit codes: 0 ok, 1 not found or store
        failure, 2 usage or bad input. An encrypted SQLite file opens with the key in
        $SESSIONS_KEY. $SESSIONS_REDACT_SALT salts the masks --redact writes (as
        PIIRedactor(hash_salt=...)), and search masks its query with it.
        """
        handle = StoreHandle(
            store_url,
            schema,
            debug,
            key=os.environ.get("SESSIONS_KEY") or None,
            redact_salt=os.environ.get("SESSIONS_REDACT_SALT") or None,
        )
        ctx.obj = handle
        ctx.call_on_close(handle.close)

    @cli.command("list")
    @click.option("--json", "as_json", is_flag=True, help="Print a JSON array.")
    @click.pass_obj
    def list_command(handle: StoreHandle, as_json: bool) -> None:
        """List every session with its name, messages, last activity and usage."""
        from .inspect_commands import cmd_list

        cmd_list(handle, as_json)

    @cli.command("show")
    @click.argument("session")
    @width_option
    @click.option("--page", type=click.IntRange(1), default=1, show_default=True, help="Which page of messages.")
    @click.option("--limit", type=click.IntRange(1), default=500, show_default=True, help="Messages a page.")
    @click.pass_obj
    def show_command(handle: StoreHandle, session: str, width: int, page: int, limit: int) -> None:
        """Print the message tree of SESSION (every branch; compactions marked), a page at a time.

        * marks the messages of the active branch (the path to the latest leaf)."""
        from .inspect_commands import cmd_show

        cmd_show(handle, session, width, page, limit)

    @cli.command("search")
    @click.argument("query")
    @click.option("--session", "sessions", multiple=True, metavar="SESSION", help="Only this session (repeatable).")
    @click.option("--limit", type=click.IntRange(1, 10_000), default=20, show_default=True)
    @click.option(
        "--match",
        type=click.Choice(["any", "all"]),
        default="any",
        show_default=True,
        help="any: messages with every word first, then those with some; all: every word only.",
    )
    @width_option
    @click.pass_obj
    def search_command(
        handle: StoreHandle, query: str, sessions: tuple[str, ...], limit: int, match: str, width: int
    ) -> None:
        """Find the messages that best match QUERY, best first.

        Messages with every word of QUERY come first, then those with some, by BM25 (stop words
        such as "what" or "the" weigh nothing). Words match their family (deploy: deploying,
        deployment) and as a prefix; identifiers by their parts (UserById in getUserById);
        Chinese, Japanese and Korean by any word or phrase. With $SESSIONS_REDACT_SALT, QUERY
        is masked as a salted redactor stored it: an address finds where it was mentioned."""
        from .inspect_commands import cmd_search

        cmd_search(handle, query, sessions, limit, width, match)

    @cli.command("export")
    @click.argument("session")
    @click.option("-o", "--output", metavar="FILE", default=None, help="Write to FILE (default: stdout).")
    @click.pass_obj
    def export_command(handle: StoreHandle, session: str, output: str | None) -> None:
        """Write SESSION as JSON Lines.

        One record per line: the session (registry row), its messages (parents first), then its
        compactions, context blocks, cached prompt and search entries."""
        from .transfer_commands import cmd_export

        cmd_export(handle, session, output)

    @cli.command("import")
    @click.argument("file", metavar="FILE")
    @click.option("--into", metavar="SESSION", default=None, help="Import into this session id instead.")
    @click.option("--dry-run", is_flag=True, help="Check the file only; write nothing.")
    @click.option(
        "--redact",
        is_flag=True,
        help="Mask personal data and secrets (PIIRedactor, salted by $SESSIONS_REDACT_SALT) before storing.",
    )
    @click.option(
        "--skip-conflicts",
        is_flag=True,
        help="Keep the stored message where the file has other content under its id, and import the rest.",
    )
    @click.pass_obj
    def import_command(
        handle: StoreHandle, file: str, into: str | None, dry_run: bool, redact: bool, skip_conflicts: bool
    ) -> None:
        """Import a JSON Lines export (FILE, or - for stdin).

        Idempotent: importing a file twice stores nothing twice.

        Every line is checked before anything is written; a bad line names its number. A message
        whose id is stored already with other content is a conflict: the import stops, naming
        them, and writes nothing (exit 1), unless --skip-conflicts.
        """
        from .transfer_commands import cmd_import

        cmd_import(handle, file, into, dry_run, redact=redact, skip_conflicts=skip_conflicts)

    @cli.command("blocks")
    @click.argument("session")
    @click.option("--history", "history", metavar="LABEL", help="List the versions of block LABEL.")
    @click.option("--restore", nargs=2, metavar="LABEL VERSION", help="Make VERSION of block LABEL current.")
    @click.option("--key", help="With --history or --restore: the entry of a keyed block.")
    @click.option(
        "--max-tokens",
        type=click.IntRange(1),
        metavar="N",
        help="With --restore: the block's max_tokens (as with_context declares it); a version over it is refused.",
    )
    @click.option(
        "--keep-versions",
        type=click.IntRange(1),
        metavar="N",
        help="With --restore: the block's keep_versions (as with_context declares it); older versions go.",
    )
    @width_option
    @click.pass_obj
    def blocks_command(
        handle: StoreHandle,
        session: str,
        history: str | None,
        restore: tuple[str, str] | None,
        key: str | None,
        max_tokens: int | None,
        keep_versions: int | None,
        width: int,
    ) -> None:
        """Show the context blocks, search entries and cached prompt of SESSION; --history LABEL
        lists a block's versions with what changed, --restore LABEL VERSION makes an old one
        current (as a new version, through Session.restore_context: give the block's
        --max-tokens and --keep-versions to have them applied)."""
        from .inspect_commands import cmd_block_history, cmd_block_restore, cmd_blocks

        if history is not None and restore:
            raise BadInput("--history and --restore go one at a time")
        if not restore:
            for option, value in (("--max-tokens", max_tokens), ("--keep-versions", keep_versions)):
                if value is not None:
                    raise BadInput(f"{option} goes with --restore")
        if history is not None:
            cmd_block_history(handle, session, history, key, width)
        elif restore:
            label, number = restore
            if not number.isdigit():
                raise BadInput(f"VERSION must be a version number, not {number!r}")
            cmd_block_restore(handle, session, label, key, int(number), max_tokens, keep_versions)
        else:
            if key is not None:
                raise BadInput("--key goes with --history or --restore")
            cmd_blocks(handle, session, width)

    @cli.command("items")
    @click.argument("path", nargs=-1, metavar="[LABEL]...")
    @click.option(
        "--namespace",
        default="",
        metavar="NS",
        help='The SessionManager namespace the items belong to (default: the default one, "").',
    )
    @click.option("--versions", "versions_of", metavar="KEY", default=None, help="List the versions of item KEY.")
    @click.option(
        "--erase",
        "erase_key",
        metavar="KEY",
        default=None,
        help="Erase item KEY for good: every version and vector of it, the store's files scrubbed.",
    )
    @click.option("--vacuum", is_flag=True, help="With --erase: also rebuild (SQLite) or VACUUM (PostgreSQL).")
    @click.option("--page", type=click.IntRange(1), default=1, show_default=True, help="Which page of items.")
    @click.option("--limit", type=click.IntRange(1, 10_000), default=50, show_default=True, help="Items a page.")
    @width_option
    @click.option("--json", "as_json", is_flag=True, help="Print a JSON array.")
    @click.pass_obj
    def items_command(
        handle: StoreHandle,
        path: tuple[str, ...],
        namespace: str,
        versions_of: str | None,
        erase_key: str | None,
        vacuum: bool,
        page: int,
        limit: int,
        width: int,
        as_json: bool,
    ) -> None:
        """List the items (LangGraph store items: SessionStore, sessions_core.Items) under the
        namespace path LABEL... (every item without one), most recently updated first, with
        their key, version and last update; --versions KEY lists every version of the item KEY
        of LABEL..., newest first (a deletion is a version without a value); --erase KEY
        erases that item with all its versions.

        Example: sessions items memories sam --versions drink"""
        if vacuum and erase_key is None:
            raise BadInput("--vacuum goes with --erase KEY")
        if erase_key is not None:
            if versions_of is not None:
                raise BadInput("give --versions KEY or --erase KEY, not both")
            from .item_commands import cmd_erase_item

            cmd_erase_item(handle, path, erase_key, namespace, vacuum, as_json)
        elif versions_of is not None:
            if page != 1:
                raise BadInput("--page goes with the list of items, not with --versions")
            from .item_commands import cmd_item_versions

            cmd_item_versions(handle, path, versions_of, namespace, width, as_json)
        else:
            from .item_commands import cmd_items

            cmd_items(handle, path, namespace, page, limit, width, as_json)

    @cli.command("stats")
    @click.option("--json", "as_json", is_flag=True, help="Print a JSON object.")
    @click.pass_obj
    def stats_command(handle: StoreHandle, as_json: bool) -> None:
        """Count sessions, messages, compactions, blocks and search entries."""
        from .inspect_commands import cmd_stats

        cmd_stats(handle, as_json)

    @cli.command("migrate")
    @click.pass_obj
    def migrate_command(handle: StoreHandle) -> None:
        """Create or upgrade the schema, and re-index search where an upgrade needs it.

        The commands that only read (list, show, search, export, blocks, stats, recall backlog,
        prune --dry-run) never upgrade a store: on an older one they stop and say to run this.
        The commands that write upgrade it on opening it; this one shows the re-indexing's
        progress. Interrupted, it resumes where it stopped."""
        from .inspect_commands import cmd_migrate

        cmd_migrate(handle)

    @cli.command("rekey")
    @click.argument("database", metavar="DB", required=False)
    @click.option("--decrypt", is_flag=True, help="Decrypt DB into a plain file instead of giving it a new key.")
    @click.pass_obj
    def rekey_command(handle: StoreHandle, database: str | None, decrypt: bool) -> None:
        """Change the key of the encrypted SQLite file DB (default: --store), or encrypt a plain one.

        The current key is $SESSIONS_KEY (unset: DB is plain, and is encrypted into a new file
        that replaces it); the new key is $SESSIONS_NEW_KEY, else asked for twice. With
        --decrypt, DB (opened with $SESSIONS_KEY) is replaced by a plain copy. Run it while
        nothing else has DB open."""
        from .encryption_commands import cmd_rekey

        if decrypt:
            cmd_rekey(handle, database, None)
            return
        new_key = os.environ.get("SESSIONS_NEW_KEY") or click.prompt(
            "New key", hide_input=True, confirmation_prompt=True
        )
        cmd_rekey(handle, database, new_key)

    @cli.command("prune")
    @click.option(
        "--older-than", required=True, metavar="AGE", help="Last activity older than AGE: 90d, 12h, 30m, 45s, 2w."
    )
    @click.option("--namespace", metavar="NS", default=None, help="Only this namespace (default: every namespace).")
    @click.option("--dry-run", is_flag=True, help="List what would go; remove nothing.")
    @click.option("--json", "as_json", is_flag=True, help="Print a JSON object.")
    @click.pass_obj
    def prune_command(
        handle: StoreHandle, older_than: str, namespace: str | None, dry_run: bool, as_json: bool
    ) -> None:
        """Delete the sessions last active longer ago than AGE, with every trace of them.

        Last activity: the newest of a session's messages, overlays, block versions, search
        entries, cached prompt and registry row. Their vectors leave the index through semantic
        recall's outbox. Prints the sessions and the rows of each kind that go."""
        from .retention_commands import cmd_prune

        cmd_prune(handle, older_than, namespace, dry_run, as_json)

    @cli.command("erase")
    @click.argument("session", required=False)
    @click.option("--namespace", metavar="NS", default=None, help="Every session of this namespace instead.")
    @click.option(
        "--message",
        "messages",
        multiple=True,
        metavar="ID",
        help="Only this message of SESSION, with the overlays made from it (repeatable).",
    )
    @click.option("--block", metavar="LABEL", default=None, help="Only this context block of SESSION, every version.")
    @click.option("--key", metavar="KEY", default=None, help="With --block: only this entry of a searchable block.")
    @click.option("--vacuum", is_flag=True, help="Also rebuild (SQLite) or VACUUM (PostgreSQL) the store.")
    @click.option(
        "--index",
        default=None,
        metavar="INDEX",
        help="Delete the vectors from this index now (MODULE:NAME); without it they go through the outbox.",
    )
    @click.option("--json", "as_json", is_flag=True, help="Print a JSON object.")
    @click.pass_obj
    def erase_command(
        handle: StoreHandle,
        session: str | None,
        namespace: str | None,
        messages: tuple[str, ...],
        block: str | None,
        key: str | None,
        vacuum: bool,
        index: str | None,
        as_json: bool,
    ) -> None:
        """Erase SESSION (or every session of --namespace, or only the --message ids or the
        --block of SESSION) so that none of its text stays in the store.

        SQLite: deleted content is zeroed, the full-text indexes merged and the WAL truncated.
        PostgreSQL: rows and index entries go; the server keeps dead tuples until VACUUM
        (--vacuum) and its WAL until recycled. Prints the rows of each kind removed."""
        from .retention_commands import cmd_erase

        cmd_erase(handle, session, namespace, vacuum, index, as_json, messages=messages, block=block, key=key)

    @cli.command("mcp")
    @click.option(
        "--store",
        "store_url",
        default=None,
        metavar="URL",
        help="The store (default: the one given before the command).",
    )
    @click.option(
        "--session", "session_id", default=None, metavar="ID", help='Serve this session (default: "default").'
    )
    @click.option(
        "--namespace", default=None, metavar="NS", help="Serve every session of NS: each call names its session_id."
    )
    @click.option(
        "--http", default=None, metavar="HOST:PORT", help="Streamable HTTP at http://HOST:PORT/mcp instead of stdio."
    )
    @click.option("--config", "config_path", default=None, metavar="FILE", help="The blocks and limits (TOML).")
    @click.option(
        "--redact",
        is_flag=True,
        help="Mask personal data and secrets (PIIRedactor, salted by $SESSIONS_REDACT_SALT) before storing"
        " (as redact = true).",
    )
    @click.pass_obj
    def mcp_command(
        handle: StoreHandle,
        store_url: str | None,
        session_id: str | None,
        namespace: str | None,
        http: str | None,
        config_path: str | None,
        redact: bool,
    ) -> None:
        """Serve the memory over MCP: its tools, its blocks as resources, the system prompt.

        Over stdio by default (for an MCP client that starts the command); --http serves
        streamable HTTP (a bare PORT binds 127.0.0.1). The store is created if missing. Without
        --config the memory is one writable block "memory" (Learned facts, 1100 tokens)."""
        from .mcp_commands import cmd_mcp

        cmd_mcp(handle, store_url, session_id, namespace, http, config_path, redact=redact)

    @cli.group("recall")
    def recall_group() -> None:
        """Semantic recall's outbox: what waits for the vector index, sending it, rebuilding.

        INDEX is MODULE:NAME, a VectorIndex of your application (or a function returning one),
        e.g. myapp.memory:vector_index."""

    @recall_group.command("backlog")
    @click.option("--json", "as_json", is_flag=True, help="Print a JSON object.")
    @click.pass_obj
    def recall_backlog_command(handle: StoreHandle, as_json: bool) -> None:
        """Show the changes waiting to be sent, those that failed, the last error, and the
        sessions and vectors recall keeps."""
        from .recall_commands import cmd_recall_backlog

        cmd_recall_backlog(handle, as_json)

    @recall_group.command("send")
    @click.option("--index", required=True, metavar="INDEX", help="The vector index to send to (MODULE:NAME).")
    @click.pass_obj
    def recall_send_command(handle: StoreHandle, index: str) -> None:
        """Send what waits in the outbox to the index now."""
        from .recall_commands import cmd_recall_send

        cmd_recall_send(handle, index)

    @recall_group.command("rebuild")
    @click.option("--session", "sessions", multiple=True, metavar="SESSION", help="Only this session (repeatable).")
    @click.option(
        "--index",
        default=None,
        metavar="INDEX",
        help="Send to this index now (MODULE:NAME); without it the application's own sender sends what is queued.",
    )
    @click.pass_obj
    def recall_rebuild_command(handle: StoreHandle, sessions: tuple[str, ...], index: str | None) -> None:
        """Send every message and entry of the sessions recall is on for (or SESSION) to the
        index again: to fill a new index, or one that lost data."""
        from .recall_commands import cmd_recall_rebuild

        cmd_recall_rebuild(handle, sessions, index)

    return cli
