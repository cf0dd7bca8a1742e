-- The depths of an overlay's two ends when its first message is an ancestor of its last (checked
-- when the overlay is written): a read then jumps over the range it covers instead of walking
-- it. -1: both ends are stored and the overlay can never apply; NULL: not known (a read walks
-- the whole path, as before).
ALTER TABLE {schema}.session_compactions ADD COLUMN from_depth INTEGER;
ALTER TABLE {schema}.session_compactions ADD COLUMN to_depth INTEGER;

UPDATE {schema}.session_memory_schema SET version = 4;
