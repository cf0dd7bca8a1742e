-- Every write to a context block or a searchable entry is kept as a version, numbered from 1
-- per block and key (key '' for a plain block): a write sets the row's version, source and
-- tool call id, and a trigger copies it into context_block_versions (so a write stays one
-- statement; a version stored already, as an import stores them, is not stored again). What was
-- stored before becomes version 1.
ALTER TABLE {schema}.context_blocks ADD COLUMN version INTEGER NOT NULL DEFAULT 1;
ALTER TABLE {schema}.context_blocks ADD COLUMN source TEXT NOT NULL DEFAULT 'code';
ALTER TABLE {schema}.context_blocks ADD COLUMN tool_call_id TEXT;
ALTER TABLE {schema}.search_entries ADD COLUMN version INTEGER NOT NULL DEFAULT 1;
ALTER TABLE {schema}.search_entries ADD COLUMN source TEXT NOT NULL DEFAULT 'code';
ALTER TABLE {schema}.search_entries ADD COLUMN tool_call_id TEXT;
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
CREATE FUNCTION {schema}.record_block_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {schema}.context_block_versions
    VALUES (NEW.session_id, NEW.label, '', NEW.version, NEW.updated_at, NEW.source, NEW.tool_call_id, NEW.content)
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END;
$$;
CREATE FUNCTION {schema}.record_entry_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {schema}.context_block_versions
    VALUES (NEW.session_id, NEW.label, NEW.key, NEW.version, NEW.updated_at, NEW.source, NEW.tool_call_id,
            NEW.content)
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END;
$$;
CREATE TRIGGER context_blocks_version AFTER INSERT OR UPDATE OF version ON {schema}.context_blocks
FOR EACH ROW EXECUTE FUNCTION {schema}.record_block_version();
CREATE TRIGGER search_entries_version AFTER INSERT OR UPDATE OF version ON {schema}.search_entries
FOR EACH ROW EXECUTE FUNCTION {schema}.record_entry_version();

UPDATE {schema}.session_memory_schema SET version = 5;
