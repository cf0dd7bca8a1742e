-- The keyword indexes take new rows in bulk: FTS5 writes a segment for every transaction that
-- changes an index, which was most of what a single append or put cost, and half the pages it
-- wrote. ``fts_indexed`` says, for each source table, up to which ``seq`` its rows are in the
-- index; a new row (``seq`` is always above it: SQLite gives the highest ``seq`` plus one, and a
-- deletion at the top lowers the mark to the highest ``seq`` left) waits, with no trigger, until
-- the store indexes what waits in one insert (``SqliteStore``: before a search of the table, in
-- a write of 64 rows or more, every 64th write, and at ``close()``). A row at or below the mark
-- is changed and removed in the index at once, as before.
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
CREATE TRIGGER session_messages_fts_delete AFTER DELETE ON session_messages BEGIN
    INSERT INTO session_messages_fts (session_messages_fts, rowid, search_terms, session_token)
    SELECT 'delete', old.seq, old.search_terms, old.session_token
    WHERE old.search_terms <> '' AND old.seq <= (SELECT seq FROM fts_indexed WHERE source = 'session_messages');
    UPDATE fts_indexed SET seq = (SELECT coalesce(max(seq), 0) FROM session_messages)
    WHERE source = 'session_messages' AND seq > (SELECT coalesce(max(seq), 0) FROM session_messages);
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
CREATE TRIGGER search_entries_fts_delete AFTER DELETE ON search_entries BEGIN
    INSERT INTO search_entries_fts (search_entries_fts, rowid, search_terms)
    SELECT 'delete', old.seq, old.search_terms
    WHERE old.search_terms <> '' AND old.seq <= (SELECT seq FROM fts_indexed WHERE source = 'search_entries');
    UPDATE fts_indexed SET seq = (SELECT coalesce(max(seq), 0) FROM search_entries)
    WHERE source = 'search_entries' AND seq > (SELECT coalesce(max(seq), 0) FROM search_entries);
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
CREATE TRIGGER store_items_fts_delete AFTER DELETE ON store_items BEGIN
    INSERT INTO store_items_fts (store_items_fts, rowid, search_terms)
    SELECT 'delete', old.seq, old.search_terms
    WHERE old.search_terms <> '' AND old.seq <= (SELECT seq FROM fts_indexed WHERE source = 'store_items');
    UPDATE fts_indexed SET seq = (SELECT coalesce(max(seq), 0) FROM store_items)
    WHERE source = 'store_items' AND seq > (SELECT coalesce(max(seq), 0) FROM store_items);
END;
CREATE TRIGGER store_items_fts_update AFTER UPDATE OF search_terms ON store_items
WHEN old.seq <= (SELECT seq FROM fts_indexed WHERE source = 'store_items') BEGIN
    INSERT INTO store_items_fts (store_items_fts, rowid, search_terms)
    SELECT 'delete', old.seq, old.search_terms WHERE old.search_terms <> '';
    INSERT INTO store_items_fts (rowid, search_terms)
    SELECT new.seq, new.search_terms WHERE new.search_terms <> '';
END;
