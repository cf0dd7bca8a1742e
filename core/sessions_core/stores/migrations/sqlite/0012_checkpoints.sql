-- LangGraph checkpoints of a session (its thread) and their pending writes (``CheckpointStore``).
-- ``session_id`` is the session's storage id; ``namespace`` and ``thread_id`` name it in a
-- manager's registry (``sessions_core.checkpoints`` registers a thread before its first write). The
-- checkpoint and each write's value are the saver's serialised bytes; ``metadata`` is JSON.
-- ``run_id`` has no index: an index would cost every write, and only deleting a run reads it.
CREATE TABLE checkpoints (
    session_id           TEXT    NOT NULL,
    checkpoint_ns        TEXT    NOT NULL,
    checkpoint_id        TEXT    NOT NULL,
    namespace            TEXT    NOT NULL,
    thread_id            TEXT    NOT NULL,
    parent_checkpoint_id TEXT,
    run_id               TEXT,
    created_at           INTEGER NOT NULL,
    type                 TEXT    NOT NULL,
    metadata             TEXT    NOT NULL,
    checkpoint           BLOB    NOT NULL,
    PRIMARY KEY (session_id, checkpoint_ns, checkpoint_id)
);

CREATE TABLE checkpoint_writes (
    session_id    TEXT    NOT NULL,
    checkpoint_ns TEXT    NOT NULL,
    checkpoint_id TEXT    NOT NULL,
    task_id       TEXT    NOT NULL,
    idx           INTEGER NOT NULL,
    channel       TEXT    NOT NULL,
    type          TEXT    NOT NULL,
    task_path     TEXT    NOT NULL,
    value         BLOB,
    PRIMARY KEY (session_id, checkpoint_ns, checkpoint_id, task_id, idx)
);
