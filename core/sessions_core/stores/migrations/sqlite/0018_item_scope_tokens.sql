-- A keyword search of the items under a namespace prefix reads that scope's postings only: an
-- indexed item's ``scope_tokens`` name its namespace and each prefix its own starts with
-- (``sql.item_scope_tokens``), a column of the items' keyword index beside their terms, so that
-- a search matches its words AND its scope's token inside the index. Until now it walked a
-- word's postings across every namespace, newest first, until enough were in its scope: a user's
-- search cost in proportion to the whole store (4.7 ms at 100,000 items, 0.6 at 10,000, for the
-- same 1,000 items of one user). A waiting item gets its tokens when it is indexed; one that is
-- not indexed (no terms) has none. ``session_memory_item_scope`` is the library's function,
-- given to the connection for this migration only.
ALTER TABLE store_items ADD COLUMN scope_tokens TEXT NOT NULL DEFAULT '';
DROP TRIGGER store_items_fts_delete;
DROP TRIGGER store_items_fts_update;
DROP TABLE store_items_fts;
CREATE VIRTUAL TABLE store_items_fts USING fts5(
    search_terms, scope_tokens, content='store_items', content_rowid='seq', tokenize='ascii'
);
UPDATE store_items SET scope_tokens = session_memory_item_scope(namespace, prefix)
WHERE search_terms <> '' AND seq <= (SELECT seq FROM fts_indexed WHERE source = 'store_items');
INSERT INTO store_items_fts (rowid, search_terms, scope_tokens)
SELECT seq, search_terms, scope_tokens FROM store_items
WHERE search_terms <> '' AND seq <= (SELECT seq FROM fts_indexed WHERE source = 'store_items');
CREATE TRIGGER store_items_fts_delete AFTER DELETE ON store_items BEGIN
    INSERT INTO store_items_fts (store_items_fts, rowid, search_terms, scope_tokens)
    SELECT 'delete', old.seq, old.search_terms, old.scope_tokens
    WHERE old.search_terms <> '' AND old.seq <= (SELECT seq FROM fts_indexed WHERE source = 'store_items');
    UPDATE fts_indexed SET seq = (SELECT coalesce(max(seq), 0) FROM store_items)
    WHERE source = 'store_items' AND seq > (SELECT coalesce(max(seq), 0) FROM store_items);
END;
CREATE TRIGGER store_items_fts_update AFTER UPDATE OF search_terms ON store_items
WHEN old.seq <= (SELECT seq FROM fts_indexed WHERE source = 'store_items') BEGIN
    INSERT INTO store_items_fts (store_items_fts, rowid, search_terms, scope_tokens)
    SELECT 'delete', old.seq, old.search_terms, old.scope_tokens WHERE old.search_terms <> '';
    UPDATE store_items SET seq = (SELECT max(seq) + 1 FROM store_items), scope_tokens = '' WHERE seq = new.seq;
END;
