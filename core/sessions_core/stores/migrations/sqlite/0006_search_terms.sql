-- Search indexes the terms of sessions_core.fts (computed by the library, stored beside the
-- text), tokenized on spaces only. Rows stored before this migration are analysed by the
-- library after it, in batches (search_backfill says what is left).
ALTER TABLE session_messages ADD COLUMN search_terms TEXT;
DROP TRIGGER session_messages_fts_insert;
DROP TRIGGER session_messages_fts_delete;
DROP TRIGGER session_messages_fts_update;
DROP TABLE session_messages_fts;
CREATE VIRTUAL TABLE session_messages_fts USING fts5(
    search_terms, session_token, content='session_messages', content_rowid='seq', tokenize='ascii'
);
INSERT INTO session_messages_fts (session_messages_fts, rank) VALUES ('rank', 'bm25(1.0, 0.0)');
CREATE TRIGGER session_messages_fts_insert AFTER INSERT ON session_messages
WHEN new.search_terms <> '' BEGIN
    INSERT INTO session_messages_fts (rowid, search_terms, session_token)
    VALUES (new.seq, new.search_terms, new.session_token);
END;
CREATE TRIGGER session_messages_fts_delete AFTER DELETE ON session_messages
WHEN old.search_terms <> '' BEGIN
    INSERT INTO session_messages_fts (session_messages_fts, rowid, search_terms, session_token)
    VALUES ('delete', old.seq, old.search_terms, old.session_token);
END;
CREATE TRIGGER session_messages_fts_update AFTER UPDATE OF search_terms ON session_messages BEGIN
    INSERT INTO session_messages_fts (session_messages_fts, rowid, search_terms, session_token)
    SELECT 'delete', old.seq, old.search_terms, old.session_token WHERE old.search_terms <> '';
    INSERT INTO session_messages_fts (rowid, search_terms, session_token)
    SELECT new.seq, new.search_terms, new.session_token WHERE new.search_terms <> '';
END;

ALTER TABLE search_entries ADD COLUMN search_terms TEXT;
DROP TRIGGER search_entries_fts_insert;
DROP TRIGGER search_entries_fts_delete;
DROP TRIGGER search_entries_fts_update;
DROP TABLE search_entries_fts;
CREATE VIRTUAL TABLE search_entries_fts USING fts5(
    search_terms, content='search_entries', content_rowid='seq', tokenize='ascii'
);
CREATE TRIGGER search_entries_fts_insert AFTER INSERT ON search_entries
WHEN new.search_terms <> '' BEGIN
    INSERT INTO search_entries_fts (rowid, search_terms) VALUES (new.seq, new.search_terms);
END;
CREATE TRIGGER search_entries_fts_delete AFTER DELETE ON search_entries
WHEN old.search_terms <> '' BEGIN
    INSERT INTO search_entries_fts (search_entries_fts, rowid, search_terms)
    VALUES ('delete', old.seq, old.search_terms);
END;
CREATE TRIGGER search_entries_fts_update AFTER UPDATE OF search_terms ON search_entries BEGIN
    INSERT INTO search_entries_fts (search_entries_fts, rowid, search_terms)
    SELECT 'delete', old.seq, old.search_terms WHERE old.search_terms <> '';
    INSERT INTO search_entries_fts (rowid, search_terms)
    SELECT new.seq, new.search_terms WHERE new.search_terms <> '';
END;

CREATE TABLE search_backfill (
    source   TEXT    PRIMARY KEY,
    next_seq INTEGER NOT NULL,
    end_seq  INTEGER NOT NULL
);
INSERT INTO search_backfill (source, next_seq, end_seq)
SELECT 'session_messages', min(seq), max(seq) FROM session_messages HAVING count(*) > 0;
INSERT INTO search_backfill (source, next_seq, end_seq)
SELECT 'search_entries', min(seq), max(seq) FROM search_entries HAVING count(*) > 0;
