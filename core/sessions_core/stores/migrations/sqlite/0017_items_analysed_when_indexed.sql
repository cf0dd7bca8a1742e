-- An item put no longer analyses its text nor writes to the keyword index: a waiting item (its
-- ``seq`` above ``fts_indexed``'s mark, migration 0015) holds in ``search_terms`` the text to
-- analyse ('' when it is not indexed), and ``SqliteStore`` analyses and indexes the waiting items
-- in bulk before a search of them (and at ``close()``), never in a write. A put that changes an
-- indexed item waits again: this trigger removes its old terms from the index and moves the
-- item above the mark (a new ``seq``), its new text left to the next search.
INSERT INTO store_items_fts (rowid, search_terms)
SELECT seq, search_terms FROM store_items
WHERE seq > (SELECT seq FROM fts_indexed WHERE source = 'store_items') AND search_terms <> '';
UPDATE fts_indexed SET seq = max(seq, (SELECT coalesce(max(seq), 0) FROM store_items)) WHERE source = 'store_items';

DROP TRIGGER store_items_fts_update;
CREATE TRIGGER store_items_fts_update AFTER UPDATE OF search_terms ON store_items
WHEN old.seq <= (SELECT seq FROM fts_indexed WHERE source = 'store_items') BEGIN
    INSERT INTO store_items_fts (store_items_fts, rowid, search_terms)
    SELECT 'delete', old.seq, old.search_terms WHERE old.search_terms <> '';
    UPDATE store_items SET seq = (SELECT max(seq) + 1 FROM store_items) WHERE seq = new.seq;
END;
