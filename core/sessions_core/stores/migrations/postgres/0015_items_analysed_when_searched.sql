-- An item put stores the text to index as it is (``waiting_text``), not its search terms: the
-- first keyword search of a namespace's items after it analyses the waiting ones and writes
-- their terms (``PostgresStore.search_items``), so that a put costs neither the analysis, the
-- ``tsvector``'s parse, nor its GIN entries. A put that changes an item empties its terms and
-- makes it wait again. ``waiting_text`` is NULL once the item is indexed (and for an item that
-- is not indexed at all).
ALTER TABLE {schema}.store_items ADD COLUMN waiting_text TEXT;
CREATE INDEX store_items_waiting ON {schema}.store_items (namespace, prefix) WHERE waiting_text IS NOT NULL;

UPDATE {schema}.session_memory_schema SET version = 15;
