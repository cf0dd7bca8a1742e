-- Every write to a context block or a keyed entry (key '' for a plain block) is kept as a
-- version, numbered from 1 per block and key; what was stored before becomes version 1.
CREATE TABLE {schema}.context_block_versions (
    session_id   TEXT    NOT NULL,
    label        TEXT    NOT NULL,
    key          TEXT    NOT NULL,
    version      INTEGER NOT NULL,
    created_at   BIGINT  NOT NULL,
    source       TEXT    NOT NULL,
    tool_call_id TEXT,
    content      TEXT    NOT NULL,
    PRIMARY KEY (session_id, label, key, version)
);
INSERT INTO {schema}.context_block_versions (session_id, label, key, version, created_at, source, content)
SELECT session_id, label, '', 1, updated_at, 'code', content FROM {schema}.context_blocks;
INSERT INTO {schema}.context_block_versions (session_id, label, key, version, created_at, source, content)
SELECT session_id, label, key, 1, updated_at, 'code', content FROM {schema}.search_entries;

UPDATE {schema}.session_memory_schema SET version = 5;
