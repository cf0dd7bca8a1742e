-- Search indexes the terms of sessions_core.fts (computed by the library, stored as a tsvector
-- with their positions), not to_tsvector('english', ...). Rows stored before this migration are
-- analysed by the library after it, in batches (search_backfill says what is left).
ALTER TABLE {schema}.session_messages DROP COLUMN content_tsv;
ALTER TABLE {schema}.session_messages ADD COLUMN search_terms TSVECTOR;
CREATE INDEX session_messages_search ON {schema}.session_messages USING GIN (search_terms);

ALTER TABLE {schema}.search_entries DROP COLUMN content_tsv;
ALTER TABLE {schema}.search_entries ADD COLUMN search_terms TSVECTOR;
CREATE INDEX search_entries_search ON {schema}.search_entries USING GIN (search_terms);

CREATE TABLE {schema}.search_backfill (
    source   TEXT   PRIMARY KEY,
    next_seq BIGINT NOT NULL,
    end_seq  BIGINT NOT NULL
);
INSERT INTO {schema}.search_backfill (source, next_seq, end_seq)
SELECT 'session_messages', min(seq), max(seq) FROM {schema}.session_messages HAVING count(*) > 0;
INSERT INTO {schema}.search_backfill (source, next_seq, end_seq)
SELECT 'search_entries', min(seq), max(seq) FROM {schema}.search_entries HAVING count(*) > 0;

UPDATE {schema}.session_memory_schema SET version = 3;
