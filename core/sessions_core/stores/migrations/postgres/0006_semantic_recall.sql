-- Semantic recall's outbox. A session in recall_sessions has every change to its messages and
-- searchable entries queued in recall_outbox by the triggers below, in the transaction that makes
-- it; a worker sends each queued change to the vector index after the commit and records the
-- vectors it sent in recall_vectors (which a later delete removes from the index again). A
-- session without recall pays one lookup in recall_sessions per write.
CREATE TABLE {schema}.recall_sessions (
    session_id TEXT PRIMARY KEY
);
CREATE TABLE {schema}.recall_outbox (
    seq        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session_id TEXT    NOT NULL,
    kind       TEXT    NOT NULL,
    ref        TEXT    NOT NULL,
    attempts   INTEGER NOT NULL DEFAULT 0,
    due        BIGINT  NOT NULL DEFAULT 0,
    error      TEXT
);
CREATE TABLE {schema}.recall_vectors (
    vector_id  TEXT    PRIMARY KEY,
    session_id TEXT    NOT NULL,
    kind       TEXT    NOT NULL,
    ref        TEXT    NOT NULL,
    chunk      INTEGER NOT NULL,
    digest     TEXT    NOT NULL
);
CREATE INDEX recall_vectors_ref ON {schema}.recall_vectors (session_id, ref);
CREATE FUNCTION {schema}.recall_queue_message() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    changed {schema}.session_messages%ROWTYPE := CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
BEGIN
    IF EXISTS (SELECT 1 FROM {schema}.recall_sessions WHERE session_id = changed.session_id) THEN
        INSERT INTO {schema}.recall_outbox (session_id, kind, ref) VALUES (changed.session_id, 'message', changed.id);
    END IF;
    RETURN NULL;
END;
$$;
CREATE FUNCTION {schema}.recall_queue_entry() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    changed {schema}.search_entries%ROWTYPE := CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
BEGIN
    IF EXISTS (SELECT 1 FROM {schema}.recall_sessions WHERE session_id = changed.session_id) THEN
        INSERT INTO {schema}.recall_outbox (session_id, kind, ref)
        VALUES (changed.session_id, 'entry', changed.label || chr(31) || changed.key);
    END IF;
    RETURN NULL;
END;
$$;
CREATE TRIGGER recall_message AFTER INSERT OR DELETE OR UPDATE OF content ON {schema}.session_messages
FOR EACH ROW EXECUTE FUNCTION {schema}.recall_queue_message();
CREATE TRIGGER recall_entry AFTER INSERT OR DELETE OR UPDATE OF content ON {schema}.search_entries
FOR EACH ROW EXECUTE FUNCTION {schema}.recall_queue_entry();

UPDATE {schema}.session_memory_schema SET version = 6;
