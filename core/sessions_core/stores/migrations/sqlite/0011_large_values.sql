-- The JSON and text of a message over 1 MiB of JSON: written in place (incremental blob I/O, as
-- the UTF-8 bytes of the text) so that an append copies neither; ``content`` and
-- ``text_content`` then hold ''. A value is written in place only into the row's last columns:
-- SQLite builds a row in memory except for the zero-filled blobs at its end.
ALTER TABLE session_messages ADD COLUMN large_text TEXT;
ALTER TABLE session_messages ADD COLUMN large_content TEXT;
