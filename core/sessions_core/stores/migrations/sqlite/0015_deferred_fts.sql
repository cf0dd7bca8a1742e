-- The keyword indexes take new rows in bulk: FTS5 writes a segment for every transaction that
-- changes an index (most of what a single append or put cost, and of the pages it writes), so
-- a new row waits, and the 64th row waiting indexes them all in one insert. ``fts_indexed``
-- says, for each source table, up to which ``seq`` its rows are in the index: a row above it
-- waits (a search first indexes those of its table, see ``SqliteStore._searchable``); a row at
-- or below it (one indexed, or a new row that takes the ``seq`` of a deleted one) is indexed,
-- changed and removed at once, as before.
CREATE TABLE fts_indexed (
    source TEXT    PRIMARY KEY,
    seq    INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO fts_indexed (source, seq) SELECT 'session_messages', coalesce(max(seq), 0) FROM session_messages;
INSERT INTO fts_indexed (source, seq) SELECT 'search_entries', coalesce(max(seq), 0) FROM search_entries;
INSERT INTO fts_indexed (source, seq) SELECT 'store_items', coalesce(max(seq), 0) FROM store_items;

DROP TRIGGER session_messages_fts_insert;
DROP TRIGGER session_messages_fts_delete;
DROP TRIGGER session_messages_fts_update;
CREATE TRIGGER session_messages_fts_insert AFTER INSERT ON session_messages BEGIN
    INSERT INTO session_messages_fts (rowid, search_terms, session_token)
    SELECT new.seq, new.search_terms, new.session_token WHERE new.search_terms <> ''
        AND new.seq <= (SELECT seq FROM fts_indexed WHERE source = 'session_messages');
    INSERT INTO session_messages_fts (rowid, search_terms, session_token)
    SELECT m.seq, m.search_terms, m.session_token FROM session_messages m, fts_indexed i
    WHERE i.source = 'session_messages' AND new.seq - i.seq >= 64
        AND m.seq > i.seq AND m.seq <= new.seq AND m.search_terms <> '';
    UPDATE fts_indexed SET seq = new.seq WHERE source = 'session_messages' AND new.seq - seq >= 64;
END;
CREATE TRIGGER session_messages_fts_delete AFTER DELETE ON session_messages
WHEN old.search_terms <> '' AND old.seq <= (SELECT seq FROM fts_indexed WHERE source = 'session_messages') BEGIN
    INSERT INTO session_messages_fts (session_messages_fts, rowid, search_terms, session_token)
    VALUES ('delete', old.seq, old.search_terms, old.session_token);
END;
CREATE TRIGGER session_messages_fts_update AFTER UPDATE OF search_terms ON session_messages
WHEN old.seq <= (SELECT seq FROM fts_indexed WHERE source = 'session_messages') BEGIN
    INSERT INTO session_messages_fts (session_messages_fts, rowid, search_terms, session_token)
    SELECT 'delete', old.seq, old.search_terms, old.session_token WHERE old.search_terms <> '';
    INSERT INTO session_messages_fts (rowid, search_terms, session_token)
    SELECT new.seq, new.search_terms, new.session_token WHERE new.search_terms <> '';
END;

DROP TRIGGER search_entries_fts_insert;
DROP TRIGGER search_entries_fts_delete;
DROP TRIGGER search_entries_fts_update;
CREATE TRIGGER search_entries_fts_insert AFTER INSERT ON search_entries BEGIN
    INSERT INTO search_entries_fts (rowid, search_terms)
    SELECT new.seq, new.search_terms WHERE new.search_terms <> ''
        AND new.seq <= (SELECT seq FROM fts_indexed WHERE source = 'search_entries');
    INSERT INTO search_entries_fts (rowid, search_terms)
    SELECT e.seq, e.search_terms FROM search_entries e, fts_indexed i
    WHERE i.source = 'search_entries' AND new.seq - i.seq >= 64
        AND e.seq > i.seq AND e.seq <= new.seq AND e.search_terms <> '';
    UPDATE fts_indexed SET seq = new.seq WHERE source = 'search_entries' AND new.seq - seq >= 64;
END;
CREATE TRIGGER search_entries_fts_delete AFTER DELETE ON search_entries
WHEN old.search_terms <> '' AND old.seq <= (SELECT seq FROM fts_indexed WHERE source = 'search_entries') BEGIN
    INSERT INTO search_entries_fts (search_entries_fts, rowid, search_terms)
    VALUES ('delete', old.seq, old.search_terms);
END;
CREATE TRIGGER search_entries_fts_update AFTER UPDATE OF search_terms ON search_entries
WHEN old.seq <= (SELECT seq FROM fts_indexed WHERE source = 'search_entries') BEGIN
    INSERT INTO search_entries_fts (search_entries_fts, rowid, search_terms)
    SELECT 'delete', old.seq, old.search_terms WHERE old.search_terms <> '';
    INSERT INTO search_entries_fts (rowid, search_terms)
    SELECT new.seq, new.search_terms WHERE new.search_terms <> '';
END;

DROP TRIGGER store_items_fts_insert;
DROP TRIGGER store_items_fts_delete;
DROP TRIGGER store_items_fts_update;
CREATE TRIGGER store_items_fts_insert AFTER INSERT ON store_items BEGIN
    INSERT INTO store_items_fts (rowid, search_terms)
    SELECT new.seq, new.search_terms WHERE new.search_terms <> ''
        AND new.seq <= (SELECT seq FROM fts_indexed WHERE source = 'store_items');
    INSERT INTO store_items_fts (rowid, search_terms)
    SELECT s.seq, s.search_terms FROM store_items s, fts_indexed i
    WHERE i.source = 'store_items' AND new.seq - i.seq >= 64
        AND s.seq > i.seq AND s.seq <= new.seq AND s.search_terms <> '';
    UPDATE fts_indexed SET seq = new.seq WHERE source = 'store_items' AND new.seq - seq >= 64;
END;
CREATE TRIGGER store_items_fts_delete AFTER DELETE ON store_items
WHEN old.search_terms <> '' AND old.seq <= (SELECT seq FROM fts_indexed WHERE source = 'store_items') BEGIN
    INSERT INTO store_items_fts (store_items_fts, rowid, search_terms) VALUES ('delete', old.seq, old.search_terms);
END;
CREATE TRIGGER store_items_fts_update AFTER UPDATE OF search_terms ON store_items
WHEN old.seq <= (SELECT seq FROM fts_indexed WHERE source = 'store_items') BEGIN
    INSERT INTO store_items_fts (store_items_fts, rowid, search_terms)
    SELECT 'delete', old.seq, old.search_terms WHERE old.search_terms <> '';
    INSERT INTO store_items_fts (rowid, search_terms)
    SELECT new.seq, new.search_terms WHERE new.search_terms <> '';
END;
