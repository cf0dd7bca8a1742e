-- Semantic recall's outbox. A session in recall_sessions has every change to its messages and
-- searchable entries queued in recall_outbox by the triggers below, in the transaction that makes
-- it; a worker sends each queued change to the vector index after the commit and records the
-- vectors it sent in recall_vectors (which a later delete removes from the index again). A
-- session without recall pays one lookup in recall_sessions per write.
CREATE TABLE recall_sessions (
    session_id TEXT PRIMARY KEY
) WITHOUT ROWID;
CREATE TABLE recall_outbox (
    seq        INTEGER PRIMARY KEY,
    session_id TEXT    NOT NULL,
    kind       TEXT    NOT NULL,
    ref        TEXT    NOT NULL,
    attempts   INTEGER NOT NULL DEFAULT 0,
    due        INTEGER NOT NULL DEFAULT 0,
    error      TEXT
);
CREATE TABLE recall_vectors (
    vector_id  TEXT    PRIMARY KEY,
    session_id TEXT    NOT NULL,
    kind       TEXT    NOT NULL,
    ref        TEXT    NOT NULL,
    chunk      INTEGER NOT NULL,
    digest     TEXT    NOT NULL
) WITHOUT ROWID;
CREATE INDEX recall_vectors_ref ON recall_vectors (session_id, ref);
CREATE TRIGGER recall_message_insert AFTER INSERT ON session_messages
WHEN EXISTS (SELECT 1 FROM recall_sessions WHERE session_id = new.session_id) BEGIN
    INSERT INTO recall_outbox (session_id, kind, ref) VALUES (new.session_id, 'message', new.id);
END;
CREATE TRIGGER recall_message_update AFTER UPDATE OF content ON session_messages
WHEN EXISTS (SELECT 1 FROM recall_sessions WHERE session_id = new.session_id) BEGIN
    INSERT INTO recall_outbox (session_id, kind, ref) VALUES (new.session_id, 'message', new.id);
END;
CREATE TRIGGER recall_message_delete AFTER DELETE ON session_messages
WHEN EXISTS (SELECT 1 FROM recall_sessions WHERE session_id = old.session_id) BEGIN
    INSERT INTO recall_outbox (session_id, kind, ref) VALUES (old.session_id, 'message', old.id);
END;
CREATE TRIGGER recall_entry_insert AFTER INSERT ON search_entries
WHEN EXISTS (SELECT 1 FROM recall_sessions WHERE session_id = new.session_id) BEGIN
    INSERT INTO recall_outbox (session_id, kind, ref) VALUES (new.session_id, 'entry', new.label || char(31) || new.key);
END;
CREATE TRIGGER recall_entry_update AFTER UPDATE OF content ON search_entries
WHEN EXISTS (SELECT 1 FROM recall_sessions WHERE session_id = new.session_id) BEGIN
    INSERT INTO recall_outbox (session_id, kind, ref) VALUES (new.session_id, 'entry', new.label || char(31) || new.key);
END;
CREATE TRIGGER recall_entry_delete AFTER DELETE ON search_entries
WHEN EXISTS (SELECT 1 FROM recall_sessions WHERE session_id = old.session_id) BEGIN
    INSERT INTO recall_outbox (session_id, kind, ref) VALUES (old.session_id, 'entry', old.label || char(31) || old.key);
END;
