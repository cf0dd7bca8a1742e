CREATE TABLE session_messages (
    seq          INTEGER PRIMARY KEY,
    session_id   TEXT    NOT NULL,
    id           TEXT    NOT NULL,
    parent_id    TEXT,
    role         TEXT    NOT NULL,
    created_at   INTEGER NOT NULL,
    tokens       INTEGER NOT NULL,
    bytes        INTEGER NOT NULL,
    depth        INTEGER NOT NULL,
    path_tokens  INTEGER NOT NULL,
    path_bytes   INTEGER NOT NULL,
    text_content TEXT    NOT NULL DEFAULT '',
    content      TEXT    NOT NULL,
    UNIQUE (session_id, id)
);
CREATE INDEX session_messages_parent ON session_messages (session_id, parent_id);
CREATE INDEX session_messages_created ON session_messages (session_id, created_at);

CREATE VIRTUAL TABLE session_messages_fts USING fts5(
    text_content, content='session_messages', content_rowid='seq',
    tokenize='porter unicode61'
);
CREATE TRIGGER session_messages_fts_insert AFTER INSERT ON session_messages
WHEN new.text_content <> '' BEGIN
    INSERT INTO session_messages_fts (rowid, text_content) VALUES (new.seq, new.text_content);
END;
CREATE TRIGGER session_messages_fts_delete AFTER DELETE ON session_messages
WHEN old.text_content <> '' BEGIN
    INSERT INTO session_messages_fts (session_messages_fts, rowid, text_content)
    VALUES ('delete', old.seq, old.text_content);
END;
CREATE TRIGGER session_messages_fts_update AFTER UPDATE OF text_content ON session_messages
BEGIN
    INSERT INTO session_messages_fts (session_messages_fts, rowid, text_content)
    SELECT 'delete', old.seq, old.text_content WHERE old.text_content <> '';
    INSERT INTO session_messages_fts (rowid, text_content)
    SELECT new.seq, new.text_content WHERE new.text_content <> '';
END;

CREATE TABLE session_compactions (
    seq             INTEGER PRIMARY KEY,
    session_id      TEXT    NOT NULL,
    id              TEXT    NOT NULL UNIQUE,
    from_message_id TEXT    NOT NULL,
    to_message_id   TEXT    NOT NULL,
    created_at      INTEGER NOT NULL,
    summary         TEXT    NOT NULL
);
CREATE INDEX session_compactions_session ON session_compactions (session_id, created_at);
