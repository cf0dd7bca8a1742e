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

CREATE FUNCTION {schema}.checkpoints_register() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM {schema}.sessions WHERE storage_id = NEW.session_id) THEN
        INSERT INTO {schema}.sessions (namespace, id, storage_id, name, created_at, updated_at)
        VALUES (NEW.namespace, NEW.thread_id, NEW.session_id, NEW.thread_id, NEW.created_at, NEW.created_at)
        ON CONFLICT DO NOTHING;
    END IF;
    RETURN NULL;
END;
$$;
CREATE TRIGGER checkpoints_register AFTER INSERT ON {schema}.checkpoints
FOR EACH ROW EXECUTE FUNCTION {schema}.checkpoints_register();

UPDATE {schema}.session_memory_schema SET version = 9;
