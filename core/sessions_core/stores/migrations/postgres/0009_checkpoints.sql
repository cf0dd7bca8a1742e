-- LangGraph checkpoints of a session (its thread) and their pending writes (``CheckpointStore``),
-- as SQLite's migration 0012. Keys sort by their bytes (COLLATE "C"), as LangGraph's ids expect.
CREATE TABLE {schema}.checkpoints (
    session_id           TEXT COLLATE "C" NOT NULL,
    checkpoint_ns        TEXT COLLATE "C" NOT NULL,
    checkpoint_id        TEXT COLLATE "C" NOT NULL,
    namespace            TEXT   NOT NULL,
    thread_id            TEXT   NOT NULL,
    parent_checkpoint_id TEXT COLLATE "C",
    run_id               TEXT,
    created_at           BIGINT NOT NULL,
    type                 TEXT   NOT NULL,
    metadata             JSONB  NOT NULL,
    checkpoint           BYTEA  NOT NULL,
    PRIMARY KEY (session_id, checkpoint_ns, checkpoint_id)
);

CREATE TABLE {schema}.checkpoint_writes (
    session_id    TEXT COLLATE "C" NOT NULL,
    checkpoint_ns TEXT COLLATE "C" NOT NULL,
    checkpoint_id TEXT COLLATE "C" NOT NULL,
    task_id       TEXT COLLATE "C" NOT NULL,
    idx           INTEGER NOT NULL,
    channel       TEXT    NOT NULL,
    type          TEXT    NOT NULL,
    task_path     TEXT COLLATE "C" NOT NULL,
    value         BYTEA,
    PRIMARY KEY (session_id, checkpoint_ns, checkpoint_id, task_id, idx)
);

UPDATE {schema}.session_memory_schema SET version = 9;
