-- The columns SQLite writes a large message's text and JSON into in place (its migration 0011),
-- so that both dialects read messages with the same statements; always NULL here.
ALTER TABLE {schema}.session_messages ADD COLUMN large_text TEXT;
ALTER TABLE {schema}.session_messages ADD COLUMN large_content TEXT;

UPDATE {schema}.session_memory_schema SET version = 8;
