-- Every write to a context block or a searchable entry is kept as a version, numbered from 1
-- per block and key (key '' for a plain block): a write sets the row's version, source and
-- tool call id, and a trigger copies it into context_block_versions (so a write stays one
-- statement; a version stored already, as an import stores them, is not stored again). What was
-- stored before becomes version 1.
ALTER TABLE context_blocks ADD COLUMN version INTEGER NOT NULL DEFAULT 1;
ALTER TABLE context_blocks ADD COLUMN source TEXT NOT NULL DEFAULT 'code';
ALTER TABLE context_blocks ADD COLUMN tool_call_id TEXT;
ALTER TABLE search_entries ADD COLUMN version INTEGER NOT NULL DEFAULT 1;
ALTER TABLE search_entries ADD COLUMN source TEXT NOT NULL DEFAULT 'code';
ALTER TABLE search_entries ADD COLUMN tool_call_id TEXT;
CREATE TABLE context_block_versions (
    session_id   TEXT    NOT NULL,
    label        TEXT    NOT NULL,
    key          TEXT    NOT NULL,
    version      INTEGER NOT NULL,
    created_at   INTEGER NOT NULL,
    source       TEXT    NOT NULL,
    tool_call_id TEXT,
    content      TEXT    NOT NULL,
    PRIMARY KEY (session_id, label, key, version)
) WITHOUT ROWID;
INSERT INTO context_block_versions (session_id, label, key, version, created_at, source, content)
SELECT session_id, label, '', 1, updated_at, 'code', content FROM context_blocks;
INSERT INTO context_block_versions (session_id, label, key, version, created_at, source, content)
SELECT session_id, label, key, 1, updated_at, 'code', content FROM search_entries;
CREATE TRIGGER context_blocks_version_insert AFTER INSERT ON context_blocks BEGIN
    INSERT OR IGNORE INTO context_block_versions VALUES
        (new.session_id, new.label, '', new.version, new.updated_at, new.source, new.tool_call_id, new.content);
END;
CREATE TRIGGER context_blocks_version_update AFTER UPDATE OF version ON context_blocks BEGIN
    INSERT OR IGNORE INTO context_block_versions VALUES
        (new.session_id, new.label, '', new.version, new.updated_at, new.source, new.tool_call_id, new.content);
END;
CREATE TRIGGER search_entries_version_insert AFTER INSERT ON search_entries BEGIN
    INSERT OR IGNORE INTO context_block_versions VALUES
        (new.session_id, new.label, new.key, new.version, new.updated_at, new.source, new.tool_call_id, new.content);
END;
CREATE TRIGGER search_entries_version_update AFTER UPDATE OF version ON search_entries BEGIN
    INSERT OR IGNORE INTO context_block_versions VALUES
        (new.session_id, new.label, new.key, new.version, new.updated_at, new.source, new.tool_call_id, new.content);
END;
