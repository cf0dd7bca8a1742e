ALTER TABLE session_messages ADD COLUMN session_token TEXT
    GENERATED ALWAYS AS ('s' || lower(hex(session_id))) VIRTUAL;
DROP TRIGGER session_messages_fts_insert;
DROP TRIGGER session_messages_fts_delete;
DROP TRIGGER session_messages_fts_update;
DROP TABLE session_messages_fts;
CREATE VIRTUAL TABLE session_messages_fts USING fts5(
    text_content, session_token, content='session_messages', content_rowid='seq',
    tokenize='porter unicode61'
);
INSERT INTO session_messages_fts (session_messages_fts, rank) VALUES ('rank', 'bm25(1.0, 0.0)');
INSERT INTO session_messages_fts (session_messages_fts) VALUES ('rebuild');
CREATE TRIGGER session_messages_fts_insert AFTER INSERT ON session_messages BEGIN
    INSERT INTO session_messages_fts (rowid, text_content, session_token)
    VALUES (new.seq, new.text_content, new.session_token);
END;
CREATE TRIGGER session_messages_fts_delete AFTER DELETE ON session_messages BEGIN
    INSERT INTO session_messages_fts (session_messages_fts, rowid, text_content, session_token)
    VALUES ('delete', old.seq, old.text_content, old.session_token);
END;
CREATE TRIGGER session_messages_fts_update AFTER UPDATE OF text_content ON session_messages BEGIN
    INSERT INTO session_messages_fts (session_messages_fts, rowid, text_content, session_token)
    VALUES ('delete', old.seq, old.text_content, old.session_token);
    INSERT INTO session_messages_fts (rowid, text_content, session_token)
    VALUES (new.seq, new.text_content, new.session_token);
END;
