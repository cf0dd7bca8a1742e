CREATE TABLE context_blocks (
    session_id TEXT    NOT NULL,
    label      TEXT    NOT NULL,
    updated_at INTEGER NOT NULL,
    content    TEXT    NOT NULL,
    PRIMARY KEY (session_id, label)
);
CREATE TABLE cached_prompts (
    session_id TEXT    PRIMARY KEY,
    updated_at INTEGER NOT NULL,
    prompt     TEXT    NOT NULL
);
CREATE TABLE search_entries (
    seq        INTEGER PRIMARY KEY,
    session_id TEXT    NOT NULL,
    label      TEXT    NOT NULL,
    key        TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    content    TEXT    NOT NULL,
    UNIQUE (session_id, label, key)
);
CREATE VIRTUAL TABLE search_entries_fts USING fts5(
    content, content='search_entries', content_rowid='seq', tokenize='porter unicode61'
);
CREATE TRIGGER search_entries_fts_insert AFTER INSERT ON search_entries BEGIN
    INSERT INTO search_entries_fts (rowid, content) VALUES (new.seq, new.content);
END;
CREATE TRIGGER search_entries_fts_delete AFTER DELETE ON search_entries BEGIN
    INSERT INTO search_entries_fts (search_entries_fts, rowid, content) VALUES ('delete', old.seq, old.content);
END;
CREATE TRIGGER search_entries_fts_update AFTER UPDATE OF content ON search_entries BEGIN
    INSERT INTO search_entries_fts (search_entries_fts, rowid, content) VALUES ('delete', old.seq, old.content);
    INSERT INTO search_entries_fts (rowid, content) VALUES (new.seq, new.content);
END;
